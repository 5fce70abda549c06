//! Session configuration shared by the client, the scheduler and the executors of an
//! OxideLake cluster.

use std::path::PathBuf;
use std::sync::Arc;

use ballista::prelude::SessionConfigExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::prelude::SessionConfig;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use oxidelake_core::BackendKind;
use oxidelake_planner::{
    DeviceTransitionRule, FixedProbe, HardwarePlacementRule, OxideOptions, OxidePhysicalCodec,
    PlacementTarget, SignedZeroInListRule, physical_optimizer_rules,
};

use super::FileAccess;

/// The environment variable naming the backend cluster plans are placed for.
pub const CLUSTER_BACKEND_ENV: &str = "OXIDE_CLUSTER_BACKEND";

/// The backend cluster plans are placed for: `OXIDE_CLUSTER_BACKEND=cpu|cuda`
/// (default cpu: no rewrites). Executors still pick their real backend at execute time.
pub fn cluster_backend_from_env() -> Result<BackendKind, String> {
    match std::env::var(CLUSTER_BACKEND_ENV) {
        Err(_) => Ok(BackendKind::CpuSimd),
        Ok(v) => match v.parse::<PlacementTarget>()? {
            PlacementTarget::Cpu | PlacementTarget::Auto => Ok(BackendKind::CpuSimd),
            PlacementTarget::Cuda => Ok(BackendKind::Cuda),
        },
    }
}

/// A Ballista session config with OxideLake's settings: the static planner (Ballista's
/// adaptive planner replaces the physical optimizer rules, ADR-0004), hash joins (which
/// the GPU join replaces; Ballista prefers sort-merge), the lake scan settings, and the
/// `oxidelake.*` options.
pub fn cluster_session_config() -> SessionConfig {
    let mut config = oxidelake_storage::ScanOptions::pruning_on()
        .apply(SessionConfig::new_with_ballista())
        .with_ballista_adaptive_query_planner(false)
        .with_option_extension(OxideOptions::default());
    config.options_mut().optimizer.prefer_hash_join = true;
    config
}

/// The scheduler's session state for `config`: Ballista's defaults plus the placement
/// rule, where `auto` means `cluster_backend`, the file-access check first (before any
/// rule can replace a scan, e.g. a COUNT(*) answered from statistics) and the device
/// transition rule last; with allowed roots, its table factories and object stores
/// guarded too ([`FileAccess::guard_session`]).
pub fn scheduler_session_state(
    config: SessionConfig,
    cluster_backend: BackendKind,
    access: &FileAccess,
) -> datafusion::error::Result<SessionState> {
    let state = ballista_core::utils::default_session_builder(config)?;
    let rule = HardwarePlacementRule::new(Arc::new(FixedProbe(cluster_backend)));
    let mut rules = physical_optimizer_rules(rule);
    rules.insert(0, Arc::new(access.clone()));
    // Last, as in embedded sessions: the
    // transitions travel to the executors through the codec. A transition that Ballista's
    // stage split separates from its device operators hands host batches on unchanged.
    rules.push(Arc::new(DeviceTransitionRule));
    let mut state = SessionStateBuilder::new_from_existing(state)
        .with_physical_optimizer_rules(rules)
        .with_optimizer_rule(Arc::new(SignedZeroInListRule::new()))
        .build();
    register_nested_functions(&mut state)?;
    crate::install_object_stores(state.runtime_env());
    // Last, over the stores just installed: DDL and every object-store call of the
    // session are checked against the roots before any I/O, not only planned scans.
    access.guard_session(state)
}

fn register_nested_functions(state: &mut SessionState) -> datafusion::error::Result<()> {
    use datafusion::execution::FunctionRegistry;
    for f in datafusion::functions_nested::all_default_nested_functions()
        .into_iter()
        .chain(crate::oxide_scalar_udfs())
    {
        state.register_udf(f)?;
    }
    for f in crate::oxide_aggregate_udfs() {
        state.register_udaf(f)?;
    }
    Ok(())
}

/// The executors' runtime producer: what Ballista's default builds (spill files under
/// `work_dir`; DataFusion's temporary directory when `None`) plus OxideLake's object
/// stores, the Parquet footer guard always among them. Ballista still wraps each
/// environment it returns with the per-task memory pool sized from the executor's flags.
pub fn executor_runtime_producer(work_dir: Option<PathBuf>) -> ballista_core::RuntimeProducer {
    Arc::new(move |_config: &SessionConfig| {
        let mut builder = RuntimeEnvBuilder::new();
        if let Some(dir) = &work_dir {
            builder = builder.with_temp_file_path(dir.clone());
        }
        let env = builder.build()?;
        crate::install_object_stores(&env);
        Ok(Arc::new(env))
    })
}

/// The codec every cluster member uses: OxideLake's nodes, then Ballista's.
pub fn cluster_codec() -> OxidePhysicalCodec {
    OxidePhysicalCodec::new(Arc::new(BallistaPhysicalExtensionCodec::default()))
}

/// The codec as Ballista's config fields want it.
pub fn cluster_codec_arc() -> Arc<dyn PhysicalExtensionCodec> {
    Arc::new(cluster_codec())
}

/// The executors' function registry: DataFusion's defaults plus the nested (array)
/// functions, which Ballista's default registry lacks (`array_distance` lives there),
/// OxideLake's UDFs, and its `min`/`max` in place of DataFusion's (an executor decodes a
/// plan's aggregates by name).
pub fn executor_function_registry() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    for f in datafusion::functions_nested::all_default_nested_functions()
        .into_iter()
        .chain(crate::oxide_scalar_udfs())
    {
        registry.scalar_functions.insert(f.name().to_string(), f);
    }
    for f in crate::oxide_aggregate_udfs() {
        registry.aggregate_functions.insert(f.name().to_string(), f);
    }
    registry
}

/// How tasks reach executors (a command-line choice); scheduler and executors must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchedulingPolicy {
    /// Executors poll the scheduler for tasks (the default: no extra ports).
    PullStaged,
    /// The scheduler pushes tasks to executors' gRPC ports.
    PushStaged,
}

impl From<SchedulingPolicy> for ballista_core::config::TaskSchedulingPolicy {
    fn from(policy: SchedulingPolicy) -> Self {
        match policy {
            SchedulingPolicy::PullStaged => Self::PullStaged,
            SchedulingPolicy::PushStaged => Self::PushStaged,
        }
    }
}
