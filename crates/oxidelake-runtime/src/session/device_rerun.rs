//! A query whose device fails before its first row runs again on the CPU (issue #45).
//!
//! GPU operators keep batches on the device between `HostToDeviceExec` and
//! `DeviceToHostExec`. The operators replay a failed batch on the CPU where one batch is
//! all that was lost; state already built on the device (a join's table, a build side
//! appended on the device) cannot be replayed batch by batch. So, as Sirius falls back to
//! DuckDB, the whole statement is planned and executed again with
//! `oxidelake.placement.target = cpu`, for that run only, when
//! - the session placed it on a device (a CPU placement never reruns; nor does a
//!   cluster's query, whose stages fail on the executors),
//! - it only reads (no DML, DDL, COPY or SET anywhere in its logical plan: a statement
//!   with effects may have had some before it failed),
//! - it failed with a device failure ([`EngineError::is_device_failure_in`]: a launch, a
//!   copy, a sticky kernel fault, device memory running out), and
//! - no row has gone out yet (batches of 0 rows do not count).
//!
//! The caller sees the CPU run's batches where the error would have been; a warning
//! names the device error and [`TelemetryHub::device_query_reruns`] counts the rerun.
//! A statement reruns at most once.
//!
//! ```text
//!   Armed ──device failure, no row yet──▶ Replanning ──planned──▶ Running (the CPU run)
//!     │                                        └──planning failed──▶ the device error
//!     └──a row, another error, the end─────────────────────────────▶ Running (as it is)
//! ```
//!
//! Nothing is planned until a failure: the stream that does not fail pays one match per
//! poll. The replan holds the statement's `DataFrame` (its logical plan and the snapshot
//! of the session state it was planned with) until the first row, then lets it go.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNode;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use datafusion::prelude::DataFrame;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use oxidelake_compute::option_keys::PLACEMENT_TARGET;
use oxidelake_core::{EngineError, TelemetryHub};
use oxidelake_planner::PlacementTarget;

/// A statement's run on the CPU placement: its executing plan and its result stream.
pub(crate) type CpuRun = (Arc<dyn ExecutionPlan>, SendableRecordBatchStream);

/// Plans and starts the statement again on the CPU placement. Called at most once, and
/// only after a device failure.
pub(crate) type CpuReplan = Box<dyn FnOnce() -> BoxFuture<'static, Result<CpuRun>> + Send>;

/// How `frame`'s statement runs again on the CPU placement, or `None` when it may not
/// run twice (it writes). The copy of the session state is the frame's own snapshot with
/// the placement target set to `cpu`: the session itself is not touched.
pub(crate) fn cpu_replan(frame: DataFrame) -> Option<CpuReplan> {
    if !reads_only(frame.logical_plan()) {
        return None;
    }
    Some(Box::new(move || {
        async move {
            let (mut state, plan) = frame.into_parts();
            state
                .config_mut()
                .options_mut()
                .set(PLACEMENT_TARGET, PlacementTarget::Cpu.as_str())?;
            let task = Arc::new(TaskContext::from(&state));
            let physical = state.create_physical_plan(&plan).await?;
            let stream = execute_stream(Arc::clone(&physical), task)?;
            Ok::<CpuRun, DataFusionError>((physical, stream))
        }
        .boxed()
    }))
}

/// Whether `plan` only reads: no DML, DDL, COPY, statement (SET, transactions, PREPARE)
/// or extension node (whose effects are unknown) anywhere in it.
fn reads_only(plan: &LogicalPlan) -> bool {
    let writes = plan.exists(|node| {
        Ok(matches!(
            node,
            LogicalPlan::Dml(_)
                | LogicalPlan::Ddl(_)
                | LogicalPlan::Copy(_)
                | LogicalPlan::Statement(_)
                | LogicalPlan::Extension(_)
        ))
    });
    matches!(writes, Ok(false))
}

/// A statement's result stream that runs the statement again on the CPU placement when
/// its device fails before the first row (see the module docs). After the first row a
/// device error is returned as it comes.
pub(crate) struct DeviceRerunStream {
    schema: SchemaRef,
    state: State,
    /// The CPU run's plan, once the statement was re-run.
    cpu_plan: Option<Arc<dyn ExecutionPlan>>,
    /// Where the rerun is counted.
    hub: Arc<TelemetryHub>,
}

enum State {
    /// No row yet; a device failure reruns.
    Armed {
        stream: SendableRecordBatchStream,
        replan: CpuReplan,
    },
    /// The device run failed with `failure`; the CPU run is being planned.
    Replanning {
        failure: DataFusionError,
        cpu_run: BoxFuture<'static, Result<CpuRun>>,
    },
    /// Items pass through as they come: after the first row or a rerun, or without a
    /// replan.
    Running(SendableRecordBatchStream),
    /// The CPU run could not be planned and the device failure was returned.
    Finished,
}

impl DeviceRerunStream {
    /// `stream`, run again through `replan` if it fails on its device before its first
    /// row (`None`: `stream` as it is), the rerun counted on `hub`.
    pub(crate) fn new(
        stream: SendableRecordBatchStream,
        replan: Option<CpuReplan>,
        hub: Arc<TelemetryHub>,
    ) -> Self {
        let schema = stream.schema();
        let state = match replan {
            Some(replan) => State::Armed { stream, replan },
            None => State::Running(stream),
        };
        Self {
            schema,
            state,
            cpu_plan: None,
            hub,
        }
    }

    /// Whether the batches come from a rerun on the CPU placement.
    pub(crate) fn reran_on_cpu(&self) -> bool {
        self.cpu_plan.is_some()
    }

    /// The CPU run's executing plan, once there was a rerun.
    pub(crate) fn cpu_plan(&self) -> Option<&Arc<dyn ExecutionPlan>> {
        self.cpu_plan.as_ref()
    }

    /// One step of the state machine: `Some` is what the poll returns, `None` goes on
    /// with the next state.
    fn step(&mut self, cx: &mut Context<'_>) -> Option<Poll<Option<Result<RecordBatch>>>> {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Running(mut stream) => {
                let poll = stream.poll_next_unpin(cx);
                self.state = State::Running(stream);
                Some(poll)
            }
            State::Armed { mut stream, replan } => match stream.poll_next_unpin(cx) {
                Poll::Ready(Some(Err(failure))) if EngineError::is_device_failure_in(&failure) => {
                    // Dropping the device run cancels its other partitions and frees
                    // what it held before the CPU run starts.
                    drop(stream);
                    self.state = State::Replanning {
                        failure,
                        cpu_run: replan(),
                    };
                    None
                }
                Poll::Ready(Some(Ok(batch))) if batch.num_rows() == 0 => {
                    self.state = State::Armed { stream, replan };
                    Some(Poll::Ready(Some(Ok(batch))))
                }
                Poll::Pending => {
                    self.state = State::Armed { stream, replan };
                    Some(Poll::Pending)
                }
                ready => {
                    self.state = State::Running(stream);
                    Some(ready)
                }
            },
            State::Replanning {
                failure,
                mut cpu_run,
            } => match cpu_run.poll_unpin(cx) {
                Poll::Pending => {
                    self.state = State::Replanning { failure, cpu_run };
                    Some(Poll::Pending)
                }
                Poll::Ready(Ok((plan, stream))) => {
                    tracing::warn!(
                        error = %failure,
                        "the query failed on its device before its first row; \
                         it was re-run on the CPU (placement target cpu for this run only)"
                    );
                    self.hub.record_device_query_rerun();
                    self.cpu_plan = Some(plan);
                    self.state = State::Running(stream);
                    None
                }
                Poll::Ready(Err(rerun_error)) => {
                    tracing::warn!(
                        error = %failure,
                        %rerun_error,
                        "the query failed on its device before its first row, \
                         and re-running it on the CPU failed to start"
                    );
                    Some(Poll::Ready(Some(Err(failure))))
                }
            },
            State::Finished => Some(Poll::Ready(None)),
        }
    }
}

impl Stream for DeviceRerunStream {
    type Item = Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(poll) = this.step(cx) {
                return poll;
            }
        }
    }
}

impl RecordBatchStream for DeviceRerunStream {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use datafusion::physical_plan::displayable;
    use datafusion::physical_plan::empty::EmptyExec;
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
    use datafusion::prelude::SessionContext;
    use oxidelake_core::{BackendKind, DeviceId};
    use oxidelake_planner::FixedProbe;

    use super::*;
    use crate::OxideSession;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
    }

    fn batch(values: &[i64]) -> RecordBatch {
        RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(values.to_vec()))]).unwrap()
    }

    fn device_failure() -> DataFusionError {
        EngineError::Device {
            device: DeviceId::new(BackendKind::Cuda, 0),
            operation: "cuLaunchKernel".into(),
            detail: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        }
        .into()
    }

    fn stream_of(items: Vec<Result<RecordBatch>>) -> SendableRecordBatchStream {
        Box::pin(RecordBatchStreamAdapter::new(
            schema(),
            futures::stream::iter(items),
        ))
    }

    /// A replan whose CPU run yields `items`, counting its calls in `calls`.
    fn cpu_run_of(items: Vec<Result<RecordBatch>>, calls: &Arc<AtomicUsize>) -> CpuReplan {
        let calls = Arc::clone(calls);
        Box::new(move || {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                let plan: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(schema()));
                Ok::<CpuRun, DataFusionError>((plan, stream_of(items)))
            }
            .boxed()
        })
    }

    /// Every item of `stream` (errors included, the stream goes on after them).
    async fn drain(stream: &mut DeviceRerunStream) -> Vec<Result<RecordBatch>> {
        let mut items = Vec::new();
        while let Some(item) = stream.next().await {
            items.push(item);
        }
        items
    }

    /// The values of the `Ok` batches among `items`, in order.
    fn values(items: &[Result<RecordBatch>]) -> Vec<i64> {
        items
            .iter()
            .filter_map(|item| item.as_ref().ok())
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[tokio::test]
    async fn a_device_failure_before_the_first_row_is_replaced_by_the_cpu_run_and_counted() {
        let hub = Arc::new(TelemetryHub::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let device_run = stream_of(vec![Ok(batch(&[])), Err(device_failure())]);
        let replan = cpu_run_of(vec![Ok(batch(&[1, 2])), Ok(batch(&[3]))], &calls);
        let mut stream = DeviceRerunStream::new(device_run, Some(replan), Arc::clone(&hub));

        let items = drain(&mut stream).await;
        assert!(items.iter().all(|item| item.is_ok()), "{items:?}");
        // The empty batch the device run gave went out; it holds no row.
        assert_eq!(items.len(), 3);
        assert_eq!(values(&items), [1, 2, 3]);
        assert!(stream.reran_on_cpu());
        assert!(stream.cpu_plan().is_some());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(hub.device_query_reruns(), 1);
    }

    #[tokio::test]
    async fn a_device_failure_after_a_row_is_returned_as_it_is() {
        let hub = Arc::new(TelemetryHub::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let device_run = stream_of(vec![Ok(batch(&[7])), Err(device_failure())]);
        let replan = cpu_run_of(vec![Ok(batch(&[7]))], &calls);
        let mut stream = DeviceRerunStream::new(device_run, Some(replan), Arc::clone(&hub));

        let items = drain(&mut stream).await;
        assert_eq!(values(&items), [7]);
        let failure = items.last().unwrap().as_ref().unwrap_err();
        assert!(EngineError::is_device_failure_in(failure), "{failure}");
        assert!(!stream.reran_on_cpu());
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(hub.device_query_reruns(), 0);
    }

    #[tokio::test]
    async fn an_error_that_is_not_a_device_failure_is_returned_without_a_rerun() {
        let hub = Arc::new(TelemetryHub::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let device_run = stream_of(vec![Err(DataFusionError::Execution(
            "Divide by zero error".into(),
        ))]);
        let replan = cpu_run_of(vec![Ok(batch(&[1]))], &calls);
        let mut stream = DeviceRerunStream::new(device_run, Some(replan), Arc::clone(&hub));

        let items = drain(&mut stream).await;
        assert_eq!(items.len(), 1);
        assert!(
            matches!(&items[0], Err(DataFusionError::Execution(m)) if m.contains("Divide")),
            "{items:?}"
        );
        assert!(!stream.reran_on_cpu());
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(hub.device_query_reruns(), 0);
    }

    #[tokio::test]
    async fn without_a_replan_a_device_failure_is_returned_as_it_is() {
        let hub = Arc::new(TelemetryHub::new());
        let mut stream = DeviceRerunStream::new(
            stream_of(vec![Err(device_failure())]),
            None,
            Arc::clone(&hub),
        );
        let items = drain(&mut stream).await;
        assert_eq!(items.len(), 1);
        assert!(EngineError::is_device_failure_in(
            items[0].as_ref().unwrap_err()
        ));
        assert!(!stream.reran_on_cpu());
        assert_eq!(hub.device_query_reruns(), 0);
    }

    #[tokio::test]
    async fn a_rerun_that_cannot_be_planned_returns_the_device_failure() {
        let hub = Arc::new(TelemetryHub::new());
        let replan: CpuReplan = Box::new(|| {
            async { Err::<CpuRun, _>(DataFusionError::Plan("no CPU plan".into())) }.boxed()
        });
        let device_run = stream_of(vec![Err(device_failure())]);
        let mut stream = DeviceRerunStream::new(device_run, Some(replan), Arc::clone(&hub));

        let items = drain(&mut stream).await;
        assert_eq!(items.len(), 1, "the stream ends after the error");
        assert!(EngineError::is_device_failure_in(
            items[0].as_ref().unwrap_err()
        ));
        assert!(!stream.reran_on_cpu());
        assert_eq!(hub.device_query_reruns(), 0);
    }

    #[tokio::test]
    async fn a_statement_is_rerun_at_most_once() {
        let hub = Arc::new(TelemetryHub::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let device_run = stream_of(vec![Err(device_failure())]);
        let replan = cpu_run_of(vec![Err(device_failure())], &calls);
        let mut stream = DeviceRerunStream::new(device_run, Some(replan), Arc::clone(&hub));

        let items = drain(&mut stream).await;
        assert_eq!(items.len(), 1);
        assert!(EngineError::is_device_failure_in(
            items[0].as_ref().unwrap_err()
        ));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(hub.device_query_reruns(), 1);
    }

    #[tokio::test]
    async fn only_statements_that_read_may_run_twice() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t (v BIGINT)").await.unwrap();
        let state = ctx.state();
        let reads = [
            "SELECT v FROM t WHERE v > 1",
            "WITH w AS (SELECT v FROM t) SELECT count(*) FROM w",
            "VALUES (1), (2)",
            "EXPLAIN ANALYZE SELECT v FROM t",
        ];
        for sql in reads {
            let plan = state.create_logical_plan(sql).await.unwrap();
            assert!(reads_only(&plan), "{sql}");
        }
        let writes = [
            "INSERT INTO t VALUES (1)",
            "EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
            "COPY t TO 'out.parquet'",
            "CREATE TABLE u (v BIGINT)",
            "SET datafusion.execution.batch_size = 1",
        ];
        for sql in writes {
            let plan = state.create_logical_plan(sql).await.unwrap();
            assert!(!reads_only(&plan), "{sql}");
        }
    }

    #[tokio::test]
    async fn the_rerun_is_planned_for_the_cpu_and_leaves_the_session_placed_as_it_was() {
        let session = OxideSession::local_with(
            PlacementTarget::Cuda,
            Arc::new(FixedProbe(BackendKind::Cuda)),
        );
        session
            .context()
            .register_batch(
                "t",
                RecordBatch::try_new(
                    Arc::new(Schema::new(vec![
                        Field::new("k", DataType::Int64, false),
                        Field::new("a", DataType::Int64, false),
                    ])),
                    vec![
                        Arc::new(Int64Array::from(vec![1, 1, 2])),
                        Arc::new(Int64Array::from(vec![10, 20, 500])),
                    ],
                )
                .unwrap(),
            )
            .unwrap();
        let frame = session
            .context()
            .sql("SELECT k, SUM(a) AS s FROM t WHERE a < 100 GROUP BY k")
            .await
            .unwrap();
        let text =
            |plan: &Arc<dyn ExecutionPlan>| displayable(plan.as_ref()).indent(false).to_string();
        let device_plan = frame.create_physical_plan().await.unwrap();
        assert!(text(&device_plan).contains("Gpu"), "{}", text(&device_plan));

        let replan = cpu_replan(frame).unwrap();
        let (cpu_plan, stream) = replan().await.unwrap();
        assert!(!text(&cpu_plan).contains("Gpu"), "{}", text(&cpu_plan));
        let batches: Vec<RecordBatch> = stream.map(|item| item.unwrap()).collect().await;
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
        assert_eq!(session.placement_target(), PlacementTarget::Cuda);
    }
}
