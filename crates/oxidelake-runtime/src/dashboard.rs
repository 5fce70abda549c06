//! `oxide tui`: the terminal dashboard over a real query. The query runs on a tokio
//! runtime while the dashboard owns the terminal on this thread; a reporter task sends
//! the plan's live figures and the telemetry every 100 ms, then the final figures and
//! the result's column statistics.

mod cluster_stages;
mod column_stats;
mod plan_view;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use datafusion::physical_plan::{ExecutionPlan, collect};
use oxidelake_core::{EngineError, TelemetryHub};
use oxidelake_tui::{AppState, Capacities, QueryStatus, Update};

use crate::OxideSession;
use crate::memory::SpillAccount;
use cluster_stages::ClusterJob;

/// How often the reporter refreshes the dashboard while the query runs.
const REFRESH: Duration = Duration::from_millis(100);

/// The operator list now: the plan's own operators, or for a cluster query the job and
/// the stages the scheduler reports (`last`: ask even if asked a moment ago).
async fn nodes(
    plan: &Arc<dyn ExecutionPlan>,
    cluster: &mut Option<ClusterJob>,
    last: bool,
) -> Vec<oxidelake_tui::PlanNode> {
    match cluster {
        Some(job) => job.nodes(plan, last).await,
        None => plan_view::plan_nodes(plan),
    }
}

fn update(nodes: Vec<oxidelake_tui::PlanNode>, status: QueryStatus) -> Update {
    Update {
        plan: Some(nodes),
        telemetry: Some(TelemetryHub::global().snapshot()),
        columns: None,
        status: Some(status),
    }
}

/// Runs the query and sends the dashboard its figures until it ends; then sets
/// `finished`.
async fn report(
    session: OxideSession,
    plan: Arc<dyn ExecutionPlan>,
    updates: Sender<Update>,
    finished: Arc<AtomicBool>,
) {
    let mut cluster = ClusterJob::for_session(&session);
    let started = Instant::now();
    let task_ctx = session.context().task_ctx();
    let disk = Arc::clone(&task_ctx.runtime_env().disk_manager);
    let hub = TelemetryHub::global();
    let mut spills = SpillAccount::default();
    let query = tokio::spawn(collect(Arc::clone(&plan), task_ctx));
    tokio::pin!(query);
    let result = loop {
        tokio::select! {
            done = &mut query => break done,
            () = tokio::time::sleep(REFRESH) => {
                spills.observe(&plan, &hub);
                spills.observe_disk(disk.used_disk_space(), &hub);
                let running = QueryStatus::Running { elapsed_ms: started.elapsed().as_millis() as u64 };
                let nodes = nodes(&plan, &mut cluster, false).await;
                if updates.send(update(nodes, running)).is_err() {
                    return; // the dashboard is gone
                }
            }
        }
    };
    finished.store(true, Ordering::Release);
    spills.observe(&plan, &hub);
    spills.observe_disk(disk.used_disk_space(), &hub);
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (status, columns) = match result {
        Ok(Ok(batches)) => (
            QueryStatus::Finished {
                elapsed_ms,
                rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            },
            Some(column_stats::column_stats(&batches)),
        ),
        Ok(Err(e)) => (QueryStatus::Failed(e.to_string()), None),
        Err(e) => (QueryStatus::Failed(format!("query task: {e}")), None),
    };
    let mut last = update(nodes(&plan, &mut cluster, true).await, status);
    last.columns = columns;
    let _ = updates.send(last);
}

/// What the gauges are drawn against on this machine: the GPU's memory when the local
/// backend is a GPU (the CPU backend has no device memory), the session's host memory
/// limit and its spill directory's limit (a gauge without one shows bytes only).
fn local_capacities(session: &OxideSession) -> Capacities {
    let vram_bytes = oxidelake_device::HardwareDetector::shared()
        .ok()
        .filter(|b| b.kind() != oxidelake_core::BackendKind::CpuSimd)
        .and_then(|b| b.memory_info().ok())
        .map_or(0, |m| m.total_bytes);
    let host_bytes = session
        .host_memory()
        .and_then(|m| m.limit)
        .map_or(0, |n| n as u64);
    Capacities {
        vram_bytes,
        host_bytes,
        disk_bytes: session
            .context()
            .runtime_env()
            .disk_manager
            .max_temp_directory_size(),
        ..Capacities::default()
    }
}

/// Runs `sql` on `session` under the dashboard until the user quits (q). Quitting
/// before the query finishes cancels it. A cluster session submits the query to its
/// scheduler and lists the stages the cluster completed.
pub fn run_dashboard(session: OxideSession, sql: &str) -> Result<(), EngineError> {
    // The query runs on these threads (`crate::runtime_threads`).
    let runtime = crate::query_runtime("oxide-dashboard")?;
    let plan = runtime.block_on(session.executable_plan(sql))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut state = AppState::new(sql);
    state.capacities = local_capacities(&session);
    state.status = QueryStatus::Running { elapsed_ms: 0 };
    state.plan = plan_view::plan_nodes(&plan);
    let cluster = ClusterJob::for_session(&session);
    let finished = Arc::new(AtomicBool::new(false));
    let query = runtime.spawn(report(
        session,
        Arc::clone(&plan),
        tx,
        Arc::clone(&finished),
    ));
    let result = oxidelake_tui::run(state, rx);
    if let Some(mut job) = cluster.filter(|_| !finished.load(Ordering::Acquire)) {
        // Quit while the job runs: stop it on the cluster too.
        query.abort();
        if let Err(e) = runtime.block_on(job.cancel(&plan)) {
            eprintln!("warning: the query may still run on the cluster: {e}");
        }
    }
    runtime.shutdown_background();
    result.map_err(|e| EngineError::Internal(format!("dashboard: {e}")))?;
    Ok(())
}
