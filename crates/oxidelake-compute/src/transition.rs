//! Where a plan's data changes device (ADR-0014): `HostToDeviceExec` copies its input's
//! batches to the device once, the GPU operators above it pass [`SegmentBatch`]es to
//! each other, and `DeviceToHostExec` copies them back once, where the next operator runs
//! on the CPU (the segment and its replay on a device failure: [`crate::segment`]).
//!
//! Between the two, batches travel through [`SegmentExec::execute_segment`] rather than
//! `ExecutionPlan::execute`; DataFusion sees ordinary nodes with their input's schema.
//! A `HostToDeviceExec` uploads one batch ahead of its consumer, so a copy overlaps the
//! device work on the batch before it. Each transition stages its copies through a
//! [`StagingPool`] of its own per partition, so a run of similar batches allocates one
//! pinned staging buffer per batch in flight, not one per batch (`staging_allocations`
//! in EXPLAIN ANALYZE). On the CPU backend nothing is copied: the batches stay host
//! batches ([`SegmentBatch::host`]) and each operator runs its host path.
//!
//! Every node's `execute` still returns host batches with the right rows (the
//! `HostToDeviceExec` passes its input through, a GPU operator runs its one batch
//! function over host batches), so a
//! plan that some later rewrite separated from its transitions stays correct, only
//! slower.

mod download;
mod metrics;
pub(crate) mod upload;

pub use download::DeviceToHostExec;
pub use upload::HostToDeviceExec;

/// The parts of `ExecutionPlan` both transitions share, written once: a transition
/// moves every row of its one input and changes none, so its properties, order,
/// statistics and (absent) expressions are its input's.
macro_rules! transition_plan_methods {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }

        fn properties(&self) -> &Arc<PlanProperties> {
            self.input.properties()
        }

        fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
            vec![&self.input]
        }

        fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
            vec![ChildStats::At(partition)]
        }

        fn statistics_from_inputs(
            &self,
            input_stats: &[Arc<Statistics>],
            _args: &StatisticsArgs,
        ) -> Result<Arc<Statistics>> {
            Ok(rows_of_input(input_stats, &self.schema(), RowsKept::All))
        }

        fn maintains_input_order(&self) -> Vec<bool> {
            vec![true]
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
        ) -> Result<TreeNodeRecursion> {
            Ok(TreeNodeRecursion::Continue)
        }

        fn metrics(&self) -> Option<MetricsSet> {
            Some(self.metrics.clone_inner())
        }
    };
}
use transition_plan_methods;

/// A transition's line in EXPLAIN: its name and the placement of the operators beside it.
fn fmt_transition(
    name: &str,
    placement: oxidelake_core::BackendKind,
    t: datafusion::physical_plan::DisplayFormatType,
    f: &mut std::fmt::Formatter<'_>,
) -> std::fmt::Result {
    use datafusion::physical_plan::DisplayFormatType;
    match t {
        DisplayFormatType::Default | DisplayFormatType::Verbose => {
            write!(f, "{}", crate::placement_label(name, placement))
        }
        DisplayFormatType::TreeRender => write!(f, "placement={placement}"),
    }
}
