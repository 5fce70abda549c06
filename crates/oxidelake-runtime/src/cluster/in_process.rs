//! A Ballista scheduler and executors inside this process, on ephemeral 127.0.0.1
//! ports, for tests and demos. The cluster owns its tokio runtime: dropping it stops
//! every task the scheduler and executors started, which is the only reliable way to
//! stop Ballista's servers (their entry points return no handles).

use std::sync::Arc;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_planner::OxidePhysicalCodec;

use super::FileAccess;
use super::config::{
    cluster_codec, cluster_session_config, executor_function_registry, executor_runtime_producer,
    scheduler_session_state,
};

/// A running in-process cluster.
pub struct InProcessCluster {
    runtime: Option<tokio::runtime::Runtime>,
    scheduler_port: u16,
    executor_codec: OxidePhysicalCodec,
    executor_ports: Vec<u16>,
    work_dirs: Vec<tempfile::TempDir>,
}

impl std::fmt::Debug for InProcessCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessCluster")
            .field("scheduler_port", &self.scheduler_port)
            .field("executors", &self.work_dirs.len())
            .finish_non_exhaustive()
    }
}

fn free_port() -> Result<u16, EngineError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| EngineError::io("127.0.0.1:0", e))?;
    Ok(listener
        .local_addr()
        .map_err(|e| EngineError::io("127.0.0.1:0", e))?
        .port())
}

fn internal(what: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Internal(format!("in-process cluster: {what}: {e}"))
}

impl InProcessCluster {
    /// Starts a scheduler placing plans for `backend` and `executors` executors with
    /// `vcores` task slots each. Returns once the scheduler listens; executors register
    /// in the background (queries wait for them).
    pub async fn start(
        executors: usize,
        vcores: usize,
        backend: BackendKind,
    ) -> Result<Self, EngineError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("oxide-cluster")
            .enable_all()
            .build()
            .map_err(|e| internal("runtime", e))?;
        let executor_codec = cluster_codec();
        let mut work_dirs = Vec::with_capacity(executors);
        let mut configs = Vec::with_capacity(executors);
        for _ in 0..executors {
            let dir = tempfile::tempdir().map_err(|e| EngineError::io("executor work dir", e))?;
            configs.push((
                dir.path().to_string_lossy().into_owned(),
                free_port()?,
                free_port()?,
            ));
            work_dirs.push(dir);
        }
        let exec_codec = executor_codec.clone();
        let executor_ports: Vec<u16> = configs.iter().map(|(_, flight, _)| *flight).collect();
        let port = runtime
            .spawn(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|e| EngineError::io("127.0.0.1:0", e))?;
                let port = listener
                    .local_addr()
                    .map_err(|e| EngineError::io("127.0.0.1:0", e))?
                    .port();
                let mut config = SchedulerConfig::default()
                    .with_hostname("127.0.0.1")
                    .with_port(port)
                    .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
                    .with_override_config_producer(Arc::new(cluster_session_config))
                    .with_override_session_builder(Arc::new(move |cfg| {
                        scheduler_session_state(cfg, backend, &FileAccess::default())
                    }));
                config.bind_host = "127.0.0.1".into();
                config.override_physical_codec = Some(Arc::new(cluster_codec()));
                let cluster = BallistaCluster::new_from_config(&config)
                    .await
                    .map_err(|e| internal("cluster state", e))?;
                let server = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(
                    cluster,
                    Arc::new(config),
                )
                .await
                .map_err(|e| internal("scheduler", e))?;
                tokio::spawn(start_grpc_service_with_listener(listener, server));
                let registry = Arc::new(executor_function_registry());
                for (work_dir, flight_port, grpc_port) in configs {
                    let runtime_producer =
                        executor_runtime_producer(Some(std::path::PathBuf::from(&work_dir)));
                    let executor = ExecutorProcessConfig {
                        bind_host: "127.0.0.1".into(),
                        external_host: Some("127.0.0.1".into()),
                        port: flight_port,
                        grpc_port,
                        scheduler_host: "127.0.0.1".into(),
                        scheduler_port: port,
                        scheduler_connect_timeout_seconds: 30,
                        vcores,
                        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
                        work_dir: Some(work_dir),
                        override_runtime_producer: Some(runtime_producer),
                        override_function_registry: Some(Arc::clone(&registry)),
                        override_config_producer: Some(Arc::new(cluster_session_config)),
                        override_physical_codec: Some(Arc::new(exec_codec.clone())),
                        ..Default::default()
                    };
                    tokio::spawn(start_executor_process(Arc::new(executor)));
                }
                Ok::<u16, EngineError>(port)
            })
            .await
            .map_err(|e| internal("start task", e))??;
        Ok(Self {
            runtime: Some(runtime),
            scheduler_port: port,
            executor_codec,
            executor_ports,
            work_dirs,
        })
    }

    /// The scheduler's address, `df://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.scheduler_port)
    }

    /// The scheduler's port.
    pub fn scheduler_port(&self) -> u16 {
        self.scheduler_port
    }

    /// The executors' Arrow Flight ports.
    pub fn executor_ports(&self) -> &[u16] {
        &self.executor_ports
    }

    /// OxideLake plan nodes the executors decoded from stage plans so far.
    pub fn gpu_nodes_received_by_executors(&self) -> u64 {
        self.executor_codec.decoded_nodes()
    }

    /// Plan nodes named `name` the executors decoded so far (e.g. `HostToDeviceExec`).
    pub fn nodes_received_by_executors(&self, name: &str) -> u64 {
        self.executor_codec.decoded_nodes_named(name)
    }

    /// Stops every scheduler and executor task (also done on drop).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Legal inside async code, unlike dropping a runtime there.
            runtime.shutdown_background();
        }
    }
}

impl Drop for InProcessCluster {
    fn drop(&mut self) {
        self.stop();
    }
}
