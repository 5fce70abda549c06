//! The shipped binaries (`oxide`, `oxide-scheduler`, `oxide-worker`) run as a user runs
//! them, in one test binary (each test binary links DataFusion and Ballista, which costs
//! minutes on two cores).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../oxidelake-runtime/tests/common/generated.rs"]
mod generated;
#[path = "../../oxidelake-sdk/tests/common/lake.rs"]
mod lake;

mod cli {
    pub mod binaries;
    pub mod cli_matrix;
    pub mod cluster_client;
    pub mod cluster_file_access;
    pub mod cluster_recovery;
    pub mod cluster_tls;
    pub mod deep_statements;
    pub mod end_to_end;
    pub mod local_cluster;
    pub mod non_utf8_arguments;
    pub mod objects_cli;
    pub mod objects_crash;
    pub mod objects_hardening;
    pub mod readme;
    pub mod sql_pty;
    pub mod tpch;
    pub mod tui_pty;
}
