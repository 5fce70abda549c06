//! `oxide-worker`: a Ballista 55 executor that decodes and runs OxideLake's GPU
//! operators, picking its local backend (CUDA or the CPU paths) at execute time.
//!
//! Its ports are bound before it registers with the scheduler: a port in use ends it
//! with an error and a non-zero status, as does a Flight server that fails later
//! (Ballista's executor reports neither to its caller).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::extension::SessionConfigExt;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use clap::Parser;
use oxidelake_runtime::cli::arguments::parse_args_or_exit;
use oxidelake_runtime::cluster::{
    DEFAULT_HEARTBEAT_INTERVAL_SECS, FlightListener, SchedulingPolicy, TlsArgs, WorkDir,
    cluster_codec_arc, cluster_session_config, executor_function_registry,
    executor_runtime_producer,
};
use oxidelake_runtime::query_runtime;

/// Ballista executor for OxideLake clusters.
#[derive(Debug, Parser)]
#[command(name = "oxide-worker", version, about, long_about = None)]
struct Args {
    /// Scheduler host.
    #[arg(long, default_value = "127.0.0.1")]
    scheduler_host: String,
    /// Scheduler gRPC port.
    #[arg(long, default_value_t = 50050)]
    scheduler_port: u16,
    /// Address to listen on (the default accepts local connections only).
    #[arg(long, default_value = "127.0.0.1")]
    bind_host: String,
    /// Host name the scheduler and other executors reach this one at.
    #[arg(long)]
    external_host: Option<String>,
    /// Arrow Flight port serving shuffle data.
    #[arg(short = 'p', long, default_value_t = 50051)]
    bind_port: u16,
    /// gRPC port (push-staged scheduling only).
    #[arg(long, default_value_t = 50052)]
    bind_grpc_port: u16,
    /// Concurrent tasks (0 = one per CPU core).
    #[arg(short = 'c', long, default_value_t = 0)]
    vcores: usize,
    /// Directory for shuffle files, private to this user (created 0700 when missing;
    /// refused when other users can enter it). Default: a private temporary directory,
    /// removed when the worker shuts down.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Seconds between heartbeats under push scheduling (pull-mode executors heartbeat
    /// with every poll). Keep it well under the scheduler's --executor-timeout.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = DEFAULT_HEARTBEAT_INTERVAL_SECS,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    heartbeat_interval: u64,
    /// Must match the scheduler's policy.
    #[arg(short = 's', long, value_enum, default_value_t = SchedulingPolicy::PullStaged)]
    task_scheduling_policy: SchedulingPolicy,
    /// Mutual TLS with the scheduler, the other workers and clients: all must present
    /// a certificate the CA signed. Needs pull-staged scheduling.
    #[command(flatten)]
    tls: TlsArgs,
    /// Log filter in RUST_LOG syntax (default: RUST_LOG if set, else info).
    #[arg(long)]
    log: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args_or_exit();
    oxidelake_runtime::cli::logging::init(oxidelake_runtime::cli::logging::filter(
        args.log.as_deref(),
        "info",
    ));
    // Tasks evaluate deep expression trees recursively on these threads.
    query_runtime("oxide-worker")?.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let vcores = if args.vcores == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.vcores
    };
    let tls =
        args.tls
            .load_for_member("oxide-worker", &args.bind_host, args.task_scheduling_policy)?;
    // Held until the executor has shut down: dropping it removes a temporary directory.
    let work_dir = WorkDir::create(args.work_dir.as_deref())?;
    let work_path = work_dir
        .path()
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("work directory {:?} is not UTF-8", work_dir.path()))?
        .to_string();
    let runtime_producer = executor_runtime_producer(Some(work_dir.path().to_path_buf()));
    let defaults = ExecutorProcessConfig::default();
    // Shuffle reads dial other workers through the task's session configuration, so
    // the TLS hook rides in it as well as in the process configuration.
    let endpoint_override = tls.as_ref().map(|t| t.endpoint_override());
    let session_endpoint = endpoint_override.clone();
    let config_producer = Arc::new(move || match &session_endpoint {
        Some(f) => {
            cluster_session_config().with_ballista_override_create_grpc_client_endpoint(f.clone())
        }
        None => cluster_session_config(),
    });
    // Bound before the executor registers: a port in use is this process's error.
    let flight_address: SocketAddr = format!("{}:{}", args.bind_host, args.bind_port)
        .parse()
        .with_context(|| format!("--bind-host {} is not an IP address", args.bind_host))?;
    let flight = FlightListener::bind(flight_address)?;
    if args.task_scheduling_policy == SchedulingPolicy::PushStaged {
        // Ballista binds the task port itself and takes no bound socket for it, so this
        // is only a best-effort early check: the probe's listener is dropped at once,
        // and another process can still take the port before Ballista binds it (that
        // failure is then Ballista's to report). What it catches is the common case, a
        // port already in use at startup, with an error naming it.
        let task_port = format!("{}:{}", args.bind_host, args.bind_grpc_port);
        std::net::TcpListener::bind(task_port.as_str())
            .with_context(|| format!("cannot listen on the task port {task_port}"))?;
    }
    let flight_server = flight.server(
        tls.as_ref(),
        defaults.grpc_max_decoding_message_size as usize,
        defaults.grpc_max_encoding_message_size as usize,
    );
    let config = ExecutorProcessConfig {
        bind_host: args.bind_host,
        external_host: args.external_host,
        port: args.bind_port,
        grpc_port: args.bind_grpc_port,
        scheduler_host: args.scheduler_host,
        scheduler_port: args.scheduler_port,
        scheduler_connect_timeout_seconds: 30,
        vcores,
        task_scheduling_policy: TaskSchedulingPolicy::from(args.task_scheduling_policy),
        work_dir: Some(work_path),
        executor_heartbeat_interval_seconds: args.heartbeat_interval,
        override_runtime_producer: Some(runtime_producer),
        override_function_registry: Some(Arc::new(executor_function_registry())),
        override_config_producer: Some(config_producer),
        override_physical_codec: Some(cluster_codec_arc()),
        override_create_grpc_client_endpoint: endpoint_override,
        override_arrow_flight_service: Some(flight_server),
        ..defaults
    };
    tracing::info!(vcores, work_dir = %work_dir.path().display(), "starting oxide-worker");
    start_executor_process(Arc::new(config)).await?;
    drop(work_dir);
    // Ballista stops the executor when a service fails and returns Ok all the same.
    if let Some(failure) = flight.failure() {
        anyhow::bail!(failure);
    }
    Ok(())
}
