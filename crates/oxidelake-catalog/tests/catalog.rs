//! Behaviour of the versioned table layer across modules, in one binary (each test binary
//! links DataFusion and delta-rs, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod catalog {
    pub mod append;
    pub mod columns;
    pub mod concurrency;
    pub mod integrity;
    pub mod layout;
    pub mod log_fuzz;
    pub mod snapshot;
    pub mod sql;
    pub mod support;
}
