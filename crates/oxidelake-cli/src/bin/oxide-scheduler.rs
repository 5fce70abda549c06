//! `oxide-scheduler`: a Ballista 55 scheduler with OxideLake's placement rule, plan
//! codec, session settings and functions.
//!
//! Plans are placed for `OXIDE_CLUSTER_BACKEND` (cpu | cuda, default cpu);
//! executors run the placed GPU operators on their own hardware, or their CPU paths.
//! A lost executor's tasks are reset after `--executor-timeout` (see
//! `oxidelake_runtime::cluster::FailureDetection` for how the defaults were chosen).

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use clap::Parser;
use oxidelake_runtime::cli::arguments::parse_args_or_exit;
use oxidelake_runtime::cluster::{
    AllowedRoot, DEFAULT_EXECUTOR_TIMEOUT_SECS, DEFAULT_MAX_FAILURES, FailureDetection, FileAccess,
    SchedulingPolicy, TlsArgs, cluster_backend_from_env, cluster_codec_arc, cluster_session_config,
    scheduler_session_state, serve_scheduler,
};
use oxidelake_runtime::query_runtime;

/// Ballista scheduler for OxideLake clusters.
#[derive(Debug, Parser)]
#[command(name = "oxide-scheduler", version, about, long_about = None)]
struct Args {
    /// Address to listen on. The default accepts local connections only. Without the
    /// --tls-* flags members talk without TLS or authentication: bind another address
    /// only on a network that only the cluster's machines reach (a warning says so).
    #[arg(long, default_value = "127.0.0.1")]
    bind_host: String,
    /// gRPC port clients (`df://host:port`) and executors connect to.
    #[arg(short = 'p', long, default_value_t = 50050)]
    bind_port: u16,
    /// Host name executors and clients are told to reach this scheduler at.
    #[arg(long, default_value = "127.0.0.1")]
    external_host: String,
    /// How tasks reach executors; executors must use the same policy.
    #[arg(short = 's', long, value_enum, default_value_t = SchedulingPolicy::PullStaged)]
    scheduler_policy: SchedulingPolicy,
    /// Backend plans are placed for: cpu | cuda. Overrides OXIDE_CLUSTER_BACKEND;
    /// default cpu (no GPU operators). Sessions can still `SET oxidelake.placement.target`.
    #[arg(long)]
    placement: Option<String>,
    /// Seconds without a heartbeat after which an executor is dead and its tasks run
    /// on the others (more than 5: a busy executor heartbeats every 5 s).
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_EXECUTOR_TIMEOUT_SECS)]
    executor_timeout: u64,
    /// Seconds to wait for an executor to (re)join after the last one was lost before
    /// running queries fail: 0 (at once) or at least 5. Default: --executor-timeout.
    #[arg(long, value_name = "SECS")]
    no_executors_grace: Option<u64>,
    /// Attempts of one task before its query fails.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FAILURES)]
    task_max_failures: usize,
    /// Attempts of one stage (re-run when shuffle output it needs was lost with an
    /// executor) before its query fails.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FAILURES)]
    stage_max_failures: usize,
    /// A directory (or URL prefix such as s3://bucket/data) queries may read and write;
    /// repeat for several. Plans touching files elsewhere are refused. Default: every
    /// path the workers can reach.
    #[arg(long = "allowed-root", value_name = "DIR|URL", value_parser = AllowedRoot::parse)]
    allowed_roots: Vec<AllowedRoot>,
    /// Also serve Arrow Flight SQL on the gRPC port, for ADBC, JDBC and ODBC clients
    /// (`grpc://host:port`; docs/flight-sql.md). Each client registers its own tables
    /// (CREATE EXTERNAL TABLE); queries run on the cluster with OxideLake's placement.
    #[arg(long)]
    flight_sql: bool,
    /// Mutual TLS: clients and executors must present a certificate the CA signed.
    #[command(flatten)]
    tls: TlsArgs,
    /// Log filter in RUST_LOG syntax (default: RUST_LOG if set, else info).
    #[arg(long)]
    log: Option<String>,
}

impl Args {
    fn failure_detection(&self) -> anyhow::Result<FailureDetection> {
        let detection = FailureDetection {
            executor_timeout_secs: self.executor_timeout,
            no_executors_grace_secs: self.no_executors_grace.unwrap_or(self.executor_timeout),
            task_max_failures: self.task_max_failures,
            stage_max_failures: self.stage_max_failures,
        };
        detection.validate()?;
        Ok(detection)
    }
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args_or_exit();
    oxidelake_runtime::cli::logging::init(oxidelake_runtime::cli::logging::filter(
        args.log.as_deref(),
        "info",
    ));
    // Jobs are planned on these threads, recursively over their expression trees
    // (`oxidelake_runtime::query_runtime`: large stacks).
    let runtime = query_runtime("oxide-scheduler")?;
    // A port in use ends `run` with an error: status 1 (tested in tests/cli).
    runtime.block_on(run(args))
}

fn parse_backend(value: &str) -> anyhow::Result<oxidelake_core::BackendKind> {
    use oxidelake_runtime::PlacementTarget;
    Ok(
        match value
            .parse::<PlacementTarget>()
            .map_err(anyhow::Error::msg)?
        {
            PlacementTarget::Cpu | PlacementTarget::Auto => oxidelake_core::BackendKind::CpuSimd,
            PlacementTarget::Cuda => oxidelake_core::BackendKind::Cuda,
        },
    )
}

async fn run(args: Args) -> anyhow::Result<()> {
    let backend = match &args.placement {
        Some(p) => parse_backend(p)?,
        None => cluster_backend_from_env().map_err(anyhow::Error::msg)?,
    };
    let detection = args.failure_detection()?;
    let address: SocketAddr = format!("{}:{}", args.bind_host, args.bind_port).parse()?;
    let tls =
        args.tls
            .load_for_member("oxide-scheduler", &args.bind_host, args.scheduler_policy)?;
    let access = FileAccess::new(args.allowed_roots.clone());
    if access.is_limited() {
        tracing::info!(roots = %access, "queries may read and write files only inside these roots");
    }
    let policy = TaskSchedulingPolicy::from(args.scheduler_policy);
    let mut config = SchedulerConfig::default()
        .with_hostname(args.external_host)
        .with_port(args.bind_port)
        .with_scheduler_policy(policy)
        .with_flight_sql(args.flight_sql)
        .with_override_config_producer(Arc::new(cluster_session_config))
        .with_override_session_builder(Arc::new(move |cfg| {
            scheduler_session_state(cfg, backend, &access)
        }));
    config.bind_host = args.bind_host;
    config.override_physical_codec = Some(cluster_codec_arc());
    config.override_create_grpc_client_endpoint = tls.as_ref().map(|t| t.endpoint_override());
    detection.apply(&mut config);
    tracing::info!(
        %address,
        placement = %backend,
        executor_timeout_secs = detection.executor_timeout_secs,
        tls = tls.is_some(),
        flight_sql = args.flight_sql,
        "starting oxide-scheduler"
    );
    let cluster = BallistaCluster::new_from_config(&config).await?;
    // Served by OxideLake rather than Ballista's `start_server`: its Flight SQL frontend
    // checks each statement's depth before Ballista parses it.
    serve_scheduler(cluster, address, Arc::new(config), tls.as_ref()).await?;
    Ok(())
}
