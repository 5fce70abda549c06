//! Placement decisions, EXPLAIN text and the plan codec, in one test binary (each test
//! binary links DataFusion, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod planner {
    pub mod codec;
    pub mod fixtures;
    pub mod grace_join;
    pub mod partial_aggregate;
    pub mod placement;
}
