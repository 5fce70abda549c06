//! `oxide-scheduler`: a Ballista 55 scheduler with OxideLake's placement rule, plan
//! codec, session settings and functions.
//!
//! Plans are placed for `OXIDE_CLUSTER_BACKEND` (cpu | cuda | metal, default cpu);
//! executors run the placed GPU operators on their own hardware, or their CPU paths.

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use clap::Parser;
use oxidelake_runtime::cluster::{
    SchedulingPolicy, cluster_backend_from_env, cluster_codec_arc, cluster_session_config,
    scheduler_session_state,
};

/// Ballista scheduler for OxideLake clusters.
#[derive(Debug, Parser)]
#[command(name = "oxide-scheduler", version, about, long_about = None)]
struct Args {
    /// Address to listen on. The default accepts local connections only; use 0.0.0.0 to
    /// serve other machines.
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
    /// Backend plans are placed for: cpu | cuda | metal. Overrides OXIDE_CLUSTER_BACKEND;
    /// default cpu (no GPU operators). Sessions can still `SET oxidelake.placement.target`.
    #[arg(long)]
    placement: Option<String>,
    /// Log filter in RUST_LOG syntax (default: RUST_LOG if set, else info).
    #[arg(long)]
    log: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    oxidelake_runtime::cli::logging::init(oxidelake_runtime::cli::logging::filter(
        args.log.as_deref(),
        "info",
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(32 * 1024 * 1024)
        .build()?;
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
            PlacementTarget::Metal => oxidelake_core::BackendKind::Metal,
        },
    )
}

async fn run(args: Args) -> anyhow::Result<()> {
    let backend = match &args.placement {
        Some(p) => parse_backend(p)?,
        None => cluster_backend_from_env().map_err(anyhow::Error::msg)?,
    };
    let address: SocketAddr = format!("{}:{}", args.bind_host, args.bind_port).parse()?;
    let policy = TaskSchedulingPolicy::from(args.scheduler_policy);
    let mut config = SchedulerConfig::default()
        .with_hostname(args.external_host)
        .with_port(args.bind_port)
        .with_scheduler_policy(policy)
        .with_override_config_producer(Arc::new(cluster_session_config))
        .with_override_session_builder(Arc::new(move |cfg| scheduler_session_state(cfg, backend)));
    config.bind_host = args.bind_host;
    config.override_physical_codec = Some(cluster_codec_arc());
    tracing::info!(%address, placement = %backend, "starting oxide-scheduler");
    let cluster = BallistaCluster::new_from_config(&config).await?;
    start_server(cluster, address, Arc::new(config)).await?;
    Ok(())
}
