//! Sessions, placement and the cluster, in one test binary (each test binary links
//! DataFusion and Ballista, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "common/generated.rs"]
mod generated;

mod runtime {
    pub mod cluster_gate;
    pub mod coverage;
    pub mod data;
    pub mod demo;
    pub mod device_budget;
    pub mod device_faults;
    pub mod device_rerun;
    pub mod device_transitions;
    pub mod differential;
    pub mod fuzz;
    pub mod hot_cache;
    pub mod join_filters;
    pub mod memory_budget;
    pub mod parquet_reads;
    pub mod tpch_oracle;
}
