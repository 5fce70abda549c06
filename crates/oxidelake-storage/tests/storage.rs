//! Cross-module tests of the storage crate, in one binary (each test binary links
//! DataFusion, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod storage {
    pub mod damaged_parquet;
    pub mod data;
    pub mod hot_cache;
    pub mod object_store_conformance;
    pub mod pruning;
}
