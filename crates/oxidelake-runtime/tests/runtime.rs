//! Sessions, placement and the cluster, in one test binary (each test binary links
//! DataFusion and Ballista, which costs minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod runtime {
    pub mod binaries;
    pub mod cli;
    pub mod cli_matrix;
    pub mod cluster_gate;
    pub mod coverage;
    pub mod data;
    pub mod demo;
    pub mod differential;
    pub mod fuzz;
    pub mod hot_cache;
    pub mod memory_budget;
    pub mod parquet_reads;
    pub mod readme;
    pub mod sql_pty;
    pub mod tpch;
    pub mod tpch_oracle;
    pub mod tui_pty;
}
