//! Cluster mode on Ballista 55: the configuration every member shares, and an
//! in-process cluster for tests and demos. The `oxide-scheduler` and `oxide-worker`
//! binaries run the same pieces as separate processes.

mod config;
mod connection_error;
mod exposure;
mod failure_detection;
mod file_access;
mod flight_listener;
mod flight_sql;
mod in_process;
mod liveness;
mod scheduler_client;
mod scheduler_server;
mod tls;
mod work_dir;

pub use config::{
    CLUSTER_BACKEND_ENV, SchedulingPolicy, cluster_backend_from_env, cluster_codec,
    cluster_codec_arc, cluster_session_config, executor_function_registry,
    executor_runtime_producer, scheduler_session_state,
};
pub(crate) use connection_error::scheduler_error;
pub use exposure::insecure_bind_warning;
pub use failure_detection::{
    BUSY_PULL_HEARTBEAT_SECS, DEFAULT_EXECUTOR_TIMEOUT_SECS, DEFAULT_HEARTBEAT_INTERVAL_SECS,
    DEFAULT_MAX_FAILURES, FailureDetection,
};
pub use file_access::{AllowedRoot, FileAccess};
pub use flight_listener::FlightListener;
pub use in_process::InProcessCluster;
pub use liveness::{
    LIVENESS_INTERVAL, LIVENESS_TIMEOUT, Liveness, REQUEST_TIMEOUT, client_endpoint_override,
    client_session_config,
};
pub(crate) use scheduler_client::{SchedulerClient, submitted_job_id};
pub use scheduler_server::serve_scheduler;
pub use tls::{ClusterTls, TlsArgs, install_crypto_provider};
pub use work_dir::WorkDir;
