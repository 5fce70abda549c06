//! `OxideSession`: one query API over embedded DataFusion and a Ballista cluster.

mod cache_statement;
mod catalog_queries;
mod device_rerun;
mod explain;
mod hot_cache;
mod query_stream;

pub use query_stream::QueryStream;

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use ballista::prelude::SessionContextExt;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use oxidelake_core::{BackendKind, EngineError, TelemetryHub};
use oxidelake_planner::{
    BackendProbe, FixedProbe, HardwarePlacementRule, OxideOptions, PlacementTarget,
    SignedZeroInListRule, embedded_optimizer_rules,
};

use crate::cluster::{
    FileAccess, client_session_config, cluster_backend_from_env, scheduler_error,
    scheduler_session_state,
};
use crate::memory::{HostBudget, HostMemory, TelemetryPool};
use crate::probe::DetectorProbe;

impl SessionMode {
    /// A query's DataFusion error as an [`EngineError`]: on a cluster, a scheduler that
    /// cannot be reached says so in one line.
    pub(crate) fn query_error(&self, e: datafusion::error::DataFusionError) -> EngineError {
        match self {
            SessionMode::Cluster(url) => scheduler_error(url, e),
            SessionMode::Embedded => oxidelake_storage::into_engine_error(e),
        }
    }
}

/// Where a session's queries run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionMode {
    /// In this process.
    Embedded,
    /// On the Ballista cluster behind this scheduler URL.
    Cluster(String),
}

/// What one query spilled to disk, and what it set aside in host memory instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillSummary {
    /// Spill files written.
    pub files: u64,
    /// Bytes written to them.
    pub bytes: u64,
    /// Bytes of joins split for the device limit that waited in host memory rather than
    /// on disk (`held_in_host_bytes` of the grace joins).
    pub held_in_host_bytes: u64,
}

/// A query session, embedded or connected to a cluster, with the placement rule, the
/// lake scan settings and the `oxidelake.*` options installed either way.
#[derive(Clone)]
pub struct OxideSession {
    ctx: SessionContext,
    mode: SessionMode,
    /// What `auto` means when planning (the local detector, or the cluster backend).
    probe: Arc<dyn BackendProbe>,
    /// The hot cache, made on first use (`CACHE TABLE`).
    hot_cache: Arc<std::sync::Mutex<hot_cache::HotCacheSlot>>,
}

impl std::fmt::Debug for OxideSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OxideSession")
            .field("mode", &self.mode)
            .field("probe", &self.probe)
            .finish_non_exhaustive()
    }
}

impl OxideSession {
    /// An embedded session: plans are placed for the local hardware (`auto`).
    pub fn local() -> Self {
        Self::local_with(PlacementTarget::Auto, Arc::new(DetectorProbe))
    }

    /// An embedded session with an explicit placement target and detector.
    pub fn local_with(target: PlacementTarget, probe: Arc<dyn BackendProbe>) -> Self {
        // The information schema answers `SHOW TABLES`, `SHOW COLUMNS`, `SHOW <option>`
        // (ours included) and the CLI's `\d`.
        let config = oxidelake_storage::lake_session_config()
            .with_information_schema(true)
            .with_option_extension(OxideOptions {
                placement_target: target,
                ..OxideOptions::default()
            });
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(config)
            .with_physical_optimizer_rules(embedded_optimizer_rules(HardwarePlacementRule::new(
                Arc::clone(&probe),
            )))
            .with_optimizer_rule(Arc::new(SignedZeroInListRule::new()))
            .build();
        // `SELECT * FROM 'data/t.parquet'` reads the file, as datafusion-cli and DuckDB do.
        let ctx = SessionContext::new_with_state(state).enable_url_table();
        for udf in crate::oxide_scalar_udfs() {
            ctx.register_udf(udf.as_ref().clone());
        }
        for udaf in crate::oxide_aggregate_udfs() {
            ctx.register_udaf(udaf.as_ref().clone());
        }
        crate::install_object_stores(&ctx.runtime_env());
        let session = Self {
            ctx,
            mode: SessionMode::Embedded,
            probe,
            hot_cache: Arc::default(),
        };
        if let Err(e) = session.install_pool(None) {
            tracing::warn!(error = %e, "host memory telemetry unavailable for this session");
        }
        session
    }

    /// Puts `budget` in force for the queries this session runs from now on: a memory
    /// pool that sorts, aggregates and joins (DataFusion's and ours) reserve from and
    /// spill or fail against, and a disk limit for their spill files. Embedded sessions
    /// only: a cluster's executors have their own memory.
    pub fn set_host_budget(&self, budget: &HostBudget) -> Result<(), EngineError> {
        if let SessionMode::Cluster(url) = &self.mode {
            return Err(EngineError::InvalidArgument {
                what: "memory limit",
                detail: format!(
                    "a host memory budget applies to embedded sessions; the executors behind {url} manage their own"
                ),
            });
        }
        self.install_pool(Some(budget))
    }

    /// Bounds the device memory the build sides of joins placed on a GPU may claim
    /// (`oxidelake.memory.device_limit`; `None`: no limit). Embedded sessions only, as
    /// [`OxideSession::set_host_budget`].
    pub fn set_device_limit(&self, bytes: Option<usize>) -> Result<(), EngineError> {
        if let SessionMode::Cluster(url) = &self.mode {
            return Err(EngineError::InvalidArgument {
                what: "device limit",
                detail: format!(
                    "a device limit applies to embedded sessions; the executors behind {url} manage their own"
                ),
            });
        }
        // Typed, as the operators read it: no text to format here and parse there.
        let state_ref = self.ctx.state_ref();
        let mut state = state_ref.write();
        let extensions = &mut state.config_mut().options_mut().extensions;
        match extensions.get_mut::<OxideOptions>() {
            Some(options) => options.device_limit = bytes,
            None => extensions.insert(OxideOptions {
                device_limit: bytes,
                ..OxideOptions::default()
            }),
        }
        Ok(())
    }

    /// What the session's memory pool holds now, its peak and its limit (`None` in
    /// cluster mode, where the memory is the executors').
    pub fn host_memory(&self) -> Option<HostMemory> {
        let env = self.ctx.runtime_env();
        env.memory_pool
            .downcast_ref::<TelemetryPool>()
            .map(TelemetryPool::host_memory)
    }

    /// Installs `budget`'s pool (and disk limit), or with `None` wraps the pool in force
    /// in a [`TelemetryPool`] unless it is one already: `SET datafusion.runtime.memory_limit`
    /// installs a bare pool, which the next statement then wraps.
    fn install_pool(&self, budget: Option<&HostBudget>) -> Result<(), EngineError> {
        // Every statement asks; only a replaced pool needs the state's write lock.
        if budget.is_none() && self.ctx.runtime_env().memory_pool.is::<TelemetryPool>() {
            return Ok(());
        }
        let state_ref = self.ctx.state_ref();
        let mut state = state_ref.write();
        let env = state.runtime_env();
        let mut builder = RuntimeEnvBuilder::from_runtime_env(env);
        let inner = match budget {
            Some(budget) => {
                if let Some(bytes) = budget.disk_limit {
                    builder = builder.with_max_temp_directory_size(bytes);
                }
                budget.pool()
            }
            None if env.memory_pool.is::<TelemetryPool>() => return Ok(()),
            None => Arc::clone(&env.memory_pool),
        };
        // A limited pool turns on the spilling hash join (`GraceHashJoinExec`): without
        // it a join whose build side passes the limit fails. An unlimited pool leaves the
        // setting as it is (a user may have set it).
        let limited = matches!(inner.memory_limit(), MemoryLimit::Finite(_));
        if limited {
            // Spilling joins keep 64 spill files open per spilling partition.
            oxidelake_memory::open_files::raise_open_file_limit();
        }
        // Keeps DataFusion's RepartitionExec off its spill path, which can deadlock
        // under a limit (`RepartitionGrantPool`).
        let inner = Arc::new(oxidelake_compute::RepartitionGrantPool::new(inner));
        let pool = TelemetryPool::new(inner, TelemetryHub::global());
        let env = builder.with_memory_pool(Arc::new(pool)).build()?;
        let mut config = state.config().clone();
        if limited {
            config
                .options_mut()
                .set(oxidelake_compute::option_keys::SPILL_JOINS, "true")?;
        }
        *state = SessionStateBuilder::from(state.clone())
            .with_config(config)
            .with_runtime_env(Arc::new(env))
            .build();
        Ok(())
    }

    /// Connects to the Ballista scheduler at `url` (`df://host:port`). Plans are placed
    /// on the scheduler for the cluster's backend (`OXIDE_CLUSTER_BACKEND` there);
    /// `SET oxidelake.placement.target` overrides it per session.
    pub async fn connect(url: &str) -> Result<Self, EngineError> {
        Self::connect_with_tls(url, None).await
    }

    /// [`OxideSession::connect`] to a cluster whose members speak mutual TLS: the
    /// scheduler and the workers the results come from are dialled over TLS,
    /// presenting `tls`'s certificate (`crate::cluster::ClusterTls`).
    pub async fn connect_with_tls(
        url: &str,
        tls: Option<crate::cluster::ClusterTls>,
    ) -> Result<Self, EngineError> {
        let parsed: crate::ClusterUrl =
            url.parse()
                .map_err(|e: crate::RuntimeError| EngineError::InvalidArgument {
                    what: "cluster URL",
                    detail: e.to_string(),
                })?;
        let state = SessionStateBuilder::new()
            .with_default_features()
            // Every connection to the cluster has a request deadline and pings its peer,
            // so a scheduler that stops answering fails the query (`cluster::Liveness`).
            .with_config(client_session_config(tls.as_ref()))
            .with_optimizer_rule(Arc::new(SignedZeroInListRule::new()))
            .build();
        let url = parsed.to_string();
        // `FROM 'data/t.parquet'` resolves on the client into a Parquet scan the cluster
        // runs, as in embedded mode.
        let ctx = SessionContext::remote_with_state(&url, state)
            .await
            .map_err(|e| scheduler_error(&url, e))?
            .enable_url_table();
        // DDL (`CREATE EXTERNAL TABLE`) and schema inference read Parquet footers here,
        // on the client.
        crate::install_object_stores(&ctx.runtime_env());
        // Registered after the context exists: creating a remote context replaces the
        // scalar-function list.
        for f in datafusion::functions_nested::all_default_nested_functions()
            .into_iter()
            .chain(crate::oxide_scalar_udfs())
        {
            ctx.register_udf(f.as_ref().clone());
        }
        for udaf in crate::oxide_aggregate_udfs() {
            ctx.register_udaf(udaf.as_ref().clone());
        }
        let backend =
            cluster_backend_from_env().map_err(|detail| EngineError::InvalidArgument {
                what: "OXIDE_CLUSTER_BACKEND",
                detail,
            })?;
        Ok(Self {
            ctx,
            mode: SessionMode::Cluster(parsed.to_string()),
            probe: Arc::new(FixedProbe(backend)),
            hot_cache: Arc::default(),
        })
    }

    /// Where this session's queries run.
    pub fn mode(&self) -> &SessionMode {
        &self.mode
    }

    /// The underlying DataFusion context (to register tables, UDFs, object stores).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The session's placement target (`oxidelake.placement.target`).
    pub fn placement_target(&self) -> PlacementTarget {
        OxideOptions::from_config(self.ctx.state().config().options()).placement_target
    }

    /// The backend plans are placed for now (`None` = the CPU, no rewrites).
    pub fn placement_backend(&self) -> Option<BackendKind> {
        self.probe.resolve(self.placement_target())
    }

    /// Registers a Parquet file or directory as a table.
    pub async fn register_parquet(&self, name: &str, path: &str) -> Result<(), EngineError> {
        oxidelake_storage::register_parquet(&self.ctx, name, path).await
    }

    /// Refuses `sql` when it nests deeper than OxideLake plans
    /// ([`crate::MAX_STATEMENT_DEPTH`]), estimated in the session's dialect
    /// (`datafusion.sql_parser.dialect`) before anything parses it. The session's own
    /// statement methods ([`Self::sql`], [`Self::sql_stream`], [`Self::explain`],
    /// [`Self::physical_plan`], [`Self::executable_plan`]) check for themselves; a
    /// caller that hands SQL text to [`Self::context`] directly checks it here first.
    pub fn check_statement_depth(&self, sql: &str) -> Result<(), EngineError> {
        let dialect = self.ctx.copied_config().options().sql_parser.dialect;
        crate::check_statement_depth(sql, dialect.as_ref())
    }

    /// Runs one SQL statement and collects its result. `EXPLAIN <query>` returns the
    /// physical plan with placement and the reason for every eligible-looking node left
    /// on the CPU (`EXPLAIN ANALYZE` / `EXPLAIN VERBOSE` are DataFusion's own). A
    /// statement nested deeper than [`crate::MAX_STATEMENT_DEPTH`] is refused before it
    /// is parsed ([`Self::check_statement_depth`]), as by every method here that takes
    /// SQL text.
    pub async fn sql(&self, sql: &str) -> Result<Vec<RecordBatch>, EngineError> {
        Ok(self.sql_with_spills(sql).await?.0)
    }

    /// [`Self::sql`], also saying what the query spilled to disk under the session's
    /// memory limit (embedded mode; a cluster's spills are the executors').
    pub async fn sql_with_spills(
        &self,
        sql: &str,
    ) -> Result<(Vec<RecordBatch>, SpillSummary), EngineError> {
        let mut stream = self.sql_stream(sql).await?;
        let batches = stream.collect().await?;
        Ok((batches, stream.spills()))
    }

    /// Starts one SQL statement and returns its result as a stream of batches (the
    /// statements [`Self::sql`] takes, with the same EXPLAIN and CACHE handling).
    /// Dropping the stream cancels the query. An embedded read-only query placed on a
    /// device that fails there before its first row is run again on the CPU
    /// ([`QueryStream::reran_on_cpu`]).
    pub async fn sql_stream(&self, sql: &str) -> Result<QueryStream, EngineError> {
        self.check_statement_depth(sql)?;
        let ready = |batches: Vec<RecordBatch>| -> Result<QueryStream, EngineError> {
            let schema = batches
                .first()
                .map(|b| b.schema())
                .ok_or_else(|| EngineError::Internal("a computed answer without batches".into()))?;
            Ok(QueryStream::ready(schema, batches, self.mode.clone()))
        };
        if let Some(plan) = self.plain_explain_target(sql).await? {
            let text = self.explain_plan(plan).await?;
            return ready(explain::as_batches(&text)?);
        }
        if let Some(statement) = cache_statement::parse(sql) {
            return ready(self.run_cache_statement(statement?).await?);
        }
        if matches!(self.mode, SessionMode::Cluster(_))
            && let Some(answer) = self.catalog_query(sql).await?
        {
            return Ok(answer);
        }
        let error = |e| self.mode.query_error(e);
        let frame = self.ctx.sql(sql).await.map_err(error)?;
        if self.mode == SessionMode::Embedded {
            // A `SET datafusion.runtime.memory_limit` just replaced the pool.
            self.install_pool(None)?;
        }
        let task = Arc::new(frame.task_ctx());
        // Placed on a device, a read-only query that fails there before its first row
        // runs again on the CPU (`device_rerun`); a cluster's stages fail on executors.
        let target = OxideOptions::from_config(task.session_config().options()).placement_target;
        let on_device = self.mode == SessionMode::Embedded && self.probe.resolve(target).is_some();
        let plan = frame.create_physical_plan().await.map_err(error)?;
        let rerun = on_device.then(|| device_rerun::cpu_replan(frame)).flatten();
        let stream: datafusion::execution::SendableRecordBatchStream =
            match datafusion::physical_plan::execute_stream(Arc::clone(&plan), task) {
                Ok(stream) => stream,
                // A device that fails as the plan starts (a stream created on a failed
                // device) fails before the first row too: where the query may run
                // again, the error is the stream's first item, and the rerun takes it.
                Err(e) if rerun.is_some() && EngineError::is_device_failure_in(&e) => {
                    let failed = futures::stream::once(async move { Err(e) });
                    Box::pin(
                        datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
                            plan.schema(),
                            failed,
                        ),
                    )
                }
                Err(e) => return Err(error(e)),
            };
        Ok(QueryStream::running(plan, stream, rerun, self.mode.clone()))
    }

    /// The physical plan of `query` as this session places it. In cluster mode the plan
    /// is built here with the scheduler's rules and placement; the executed stage
    /// plans are what the scheduler sends.
    pub async fn explain(&self, query: &str) -> Result<String, EngineError> {
        let plan = self.physical_plan(query).await?;
        Ok(self.with_placement(&plan))
    }

    /// [`Self::explain`] for a logical plan (a DataFrame's): planned with the session's
    /// current state (embedded) or the scheduler's rules (cluster).
    pub async fn explain_plan(&self, plan: LogicalPlan) -> Result<String, EngineError> {
        let physical = match &self.mode {
            SessionMode::Embedded => self.ctx.state().create_physical_plan(&plan).await?,
            SessionMode::Cluster(_) => {
                let config = self.scheduler_like_config();
                let state =
                    scheduler_session_state(config, self.probe.local_backend(), &no_limit())?;
                state.create_physical_plan(&plan).await?
            }
        };
        Ok(self.with_placement(&physical))
    }

    fn with_placement(&self, plan: &Arc<dyn ExecutionPlan>) -> String {
        let backend = match self.placement_backend() {
            Some(kind) => Ok(kind),
            None if self.placement_target() == PlacementTarget::Cpu => {
                Err(oxidelake_planner::CpuTarget::Requested)
            }
            None => Err(oxidelake_planner::CpuTarget::NoGpuDetected),
        };
        oxidelake_planner::explain_with_placement(plan, backend)
    }

    /// The session's settings for planning here as the scheduler plans. With a default
    /// catalog of its own: the remote context's settings say not to create one (its
    /// state was rebuilt for URL tables over the catalogs it had).
    fn scheduler_like_config(&self) -> SessionConfig {
        self.ctx
            .state()
            .config()
            .clone()
            .with_create_default_catalog_and_schema(true)
    }

    /// In cluster mode, `sql` answered on the client when the catalog alone answers it
    /// (`SHOW TABLES`, `DESCRIBE t`, `\d`; see `catalog_queries`). `None` sends it
    /// to the cluster, also when the local planner refuses it.
    async fn catalog_query(&self, sql: &str) -> Result<Option<QueryStream>, EngineError> {
        let local = catalog_queries::catalog_context(&self.ctx);
        let Ok(plan) = local.state().create_logical_plan(sql).await else {
            return Ok(None);
        };
        if !catalog_queries::answered_by_the_catalog(&plan) {
            return Ok(None);
        }
        let frame = local.execute_logical_plan(plan).await?;
        let schema = Arc::clone(frame.schema().inner());
        let batches = frame.collect().await?;
        Ok(Some(QueryStream::ready(
            schema,
            batches,
            SessionMode::Embedded,
        )))
    }

    /// The plan `query` runs as: embedded, the placed physical plan
    /// ([`Self::physical_plan`]); on a cluster, the `DistributedQueryExec` that submits
    /// the job to the scheduler when executed (the scheduler plans and places the stages).
    pub async fn executable_plan(
        &self,
        query: &str,
    ) -> Result<Arc<dyn ExecutionPlan>, EngineError> {
        match &self.mode {
            SessionMode::Embedded => self.physical_plan(query).await,
            SessionMode::Cluster(_) => {
                self.check_statement_depth(query)?;
                let error = |e| self.mode.query_error(e);
                let frame = self.ctx.sql(query).await.map_err(error)?;
                frame.create_physical_plan().await.map_err(error)
            }
        }
    }

    /// The physical plan of `query` (embedded: what runs; cluster: what the scheduler
    /// builds, planned here with the same rules).
    pub async fn physical_plan(&self, query: &str) -> Result<Arc<dyn ExecutionPlan>, EngineError> {
        self.check_statement_depth(query)?;
        match &self.mode {
            SessionMode::Embedded => Ok(self.ctx.sql(query).await?.create_physical_plan().await?),
            SessionMode::Cluster(_) => {
                let config = self.scheduler_like_config();
                let backend = self.probe.local_backend();
                let state = scheduler_session_state(config, backend, &no_limit())?;
                let local = SessionContext::new_with_state(state);
                for (name, table) in self.tables().await? {
                    local.register_table(name.as_str(), table)?;
                }
                Ok(local.sql(query).await?.create_physical_plan().await?)
            }
        }
    }

    async fn tables(
        &self,
    ) -> Result<Vec<(String, Arc<dyn datafusion::catalog::TableProvider>)>, EngineError> {
        let mut out = Vec::new();
        let catalog = self.ctx.catalog("datafusion");
        let Some(schema) = catalog.and_then(|c| c.schema("public")) else {
            return Ok(out);
        };
        for name in schema.table_names() {
            if let Some(table) = schema.table(&name).await? {
                out.push((name, table));
            }
        }
        Ok(out)
    }
}

/// The file-access check of client-side planning: none. The scheduler holds the real
/// limit (its `--allowed-root`); a client cannot know it and must not be trusted with it.
fn no_limit() -> FileAccess {
    FileAccess::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_method_taking_sql_refuses_a_statement_past_the_depth_limit_before_parsing_it() {
        let session = OxideSession::local();
        let deep = format!("SELECT 1{}", "+1".repeat(20_000));
        let refusals = [
            session.sql(&deep).await.map(drop),
            session.sql_stream(&deep).await.map(drop),
            session.explain(&deep).await.map(drop),
            session.physical_plan(&deep).await.map(drop),
            session.executable_plan(&deep).await.map(drop),
        ];
        for refusal in refusals {
            let err = refusal.unwrap_err().to_string();
            assert!(
                err.starts_with("invalid statement:") && err.contains("at most 10000"),
                "{err}"
            );
        }
        assert!(session.sql("SELECT 1").await.is_ok());
    }
}
