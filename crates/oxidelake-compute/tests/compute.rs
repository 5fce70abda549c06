//! Cross-crate tests of the compute crate, in one binary (each test binary links
//! DataFusion, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod compute {
    pub mod conformance;
    pub mod data;
    #[cfg(feature = "cuda")]
    pub mod emu;
    #[cfg(feature = "cuda")]
    pub mod faults;
    pub mod gathering;
    pub mod partitioned_join;
    #[cfg(feature = "cuda")]
    pub mod pipeline;
    pub mod plans;
    pub mod properties;
    pub mod rows;
    pub mod transitions;
    pub mod typed_filters;
}
