//! `DeviceToHostExec`: where a plan's batches come back from the device (see
//! [`crate::transition`]).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
    statistics::ChildStats,
};
use futures::StreamExt;
use oxidelake_core::BackendKind;
use oxidelake_device::device_batch::{self, StagingPool};

use super::metrics::{PARKED_STAGING, TransitionMetrics};
use crate::exec_support::{ExecBackend, RowsKept, rows_of_input, single_child};
use crate::gathering::coalesce_small;
use crate::segment::replay::{as_segment, recover, replay_if_degraded};
use crate::segment::{SegmentBatch, SegmentStream, blocking};

/// Copies device batches back to the host for the CPU operator above.
#[derive(Debug)]
pub struct DeviceToHostExec {
    input: Arc<dyn ExecutionPlan>,
    placement: BackendKind,
    metrics: ExecutionPlanMetricsSet,
}

impl DeviceToHostExec {
    /// The transition above `input` (a node producing device batches).
    pub fn new(input: Arc<dyn ExecutionPlan>, placement: BackendKind) -> Self {
        Self {
            input,
            placement,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The input plan.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The backend kind the operators beside it were placed for.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }
}

impl DisplayAs for DeviceToHostExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::fmt_transition("DeviceToHostExec", self.placement, t, f)
    }
}

impl ExecutionPlan for DeviceToHostExec {
    super::transition_plan_methods!("DeviceToHostExec");

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(DeviceToHostExec::new(
            single_child(children, "DeviceToHostExec")?,
            self.placement,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema = self.input.schema();
        let Some(segment) = as_segment(&self.input) else {
            // Separated from its device operators by a rewrite: its input is host data.
            return self.input.execute(partition, context);
        };
        let batch_size = context.session_config().batch_size();
        let SegmentStream {
            backend,
            detected,
            batches,
        } = segment.execute_segment(partition, context)?;
        let exec = Arc::new(ExecBackend::on(backend, detected)?);
        let metrics = Arc::new(TransitionMetrics::new(
            &self.metrics,
            partition,
            "DeviceToHostExec",
            self.placement,
            &exec,
        ));
        let pool = Arc::new(StagingPool::new(PARKED_STAGING));
        let input = Arc::clone(&self.input);
        let stream = batches.then(move |batch| {
            let (exec, metrics, pool, input) = (
                Arc::clone(&exec),
                Arc::clone(&metrics),
                Arc::clone(&pool),
                Arc::clone(&input),
            );
            async move {
                let SegmentBatch { batch, origin, .. } = batch?;
                if let Some(host) = batch.as_host() {
                    let no_device = metrics.operator.no_device;
                    metrics.host_batch(host.num_rows(), Instant::now(), no_device);
                    return Ok(host.clone());
                }
                blocking(move || {
                    let started = Instant::now();
                    let replayed =
                        replay_if_degraded(origin.as_deref(), &input, &exec, &metrics.operator);
                    let host = match replayed {
                        Some(host) => host?,
                        None => match device_batch::download_with(
                            exec.backend.as_ref(),
                            &exec.stream,
                            &batch,
                            Some(&pool),
                        ) {
                            Ok(host) => {
                                let rows = host.num_rows();
                                metrics.record(&exec, rows, started, batch.bytes(), &pool);
                                return Ok(host);
                            }
                            Err(err) => recover(
                                DataFusionError::from(err),
                                origin.as_deref(),
                                &input,
                                &exec,
                                &metrics.operator,
                                "DeviceToHostExec",
                            )?,
                        },
                    };
                    // The replay counted the batch as a CPU one already.
                    metrics.host_batch(host.num_rows(), started, false);
                    Ok(host)
                })
                .await
            }
        });
        // A selective segment hands back small batches: they are merged, as a host
        // operator's output is (`coalesce_small`).
        Ok(coalesce_small(
            Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
            batch_size,
        ))
    }
}
