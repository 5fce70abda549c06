//! The fluent DataFrame API against the same queries in SQL, its placement-aware
//! `explain`, and both through a connected in-process cluster, in one test binary (each
//! test binary links DataFusion, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod api {
    pub mod cluster;
    pub mod explain;
    pub mod fixtures;
    pub mod fluent;
}
