//! `DeviceTransitionRule`: marks where a plan's data changes device (ADR-0014).
//!
//! Every segment operator (a GPU filter, a
//! GPU projection that computes a column) placed on a device whose input and output
//! columns a device batch can hold gets a `HostToDeviceExec` below it and a
//! `DeviceToHostExec` above it; between two such operators the pair cancels, so a chain
//! of them crosses once each way. A GPU partial aggregate above such a chain takes the
//! place of its `DeviceToHostExec`: it reads the device batches, and its result (one row
//! per group and batch) is what comes back to the host (`input=device` in EXPLAIN). A
//! partial aggregate over host batches reaches the device through the host edge
//! (`oxidelake_device::edge`), which uploads only its key and value columns: an upload
//! of the whole batch for it alone would move more to save nothing. A GPU join the device runs whole
//! (`GpuHashJoinExec::joins_on_device`) with an input that hands on device batches
//! builds and probes there and hands on device batches itself (`build=device`,
//! `probe=device`); its other input is uploaded if it is on the host, so every scan
//! under a chain of such joins crosses once. Any other GPU join reads host batches: the
//! downloads under it stay, and its probes reach the device through the host edge, which
//! uploads only the keys. EXPLAIN shows the transitions.
//!
//! The rule runs last, after DataFusion has placed its repartitions, sorts and
//! coalesces, so nothing comes between a transition and the operator it feeds. Embedded
//! sessions and the cluster's scheduler run it (the codec ships transitions to the
//! executors; one that a stage split separates from its operators passes host batches).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{ChildrenPropertiesMode, ReplaceChildrenOptions};
use datafusion::physical_plan::joins::PartitionMode;
use oxidelake_compute::device_batch::check_device_schema;
use oxidelake_compute::{
    DeviceToHostExec, GpuFilterExec, GpuHashJoinExec, GpuPartialAggregateExec, GpuProjectionExec,
    HostToDeviceExec,
};
use oxidelake_core::BackendKind;

use crate::OxideOptions;

/// See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceTransitionRule;

impl DeviceTransitionRule {
    /// The name DataFusion lists the rule under.
    pub const NAME: &'static str = "device_transitions";
}

/// The device-batch source for a segment operator above `input`: the node inside an
/// existing `DeviceToHostExec` (two segment operators in a row), or a new
/// `HostToDeviceExec`.
fn segment_input(input: &Arc<dyn ExecutionPlan>, placement: BackendKind) -> Arc<dyn ExecutionPlan> {
    match input.downcast_ref::<DeviceToHostExec>() {
        Some(d2h) => Arc::clone(d2h.input()),
        None => Arc::new(HostToDeviceExec::new(Arc::clone(input), placement)),
    }
}

/// The placement and input of `node` when it is an operator that takes and gives device
/// batches: a GPU filter, or a GPU projection with a column to compute (one that only
/// repeats a scalar subquery's value has no device work).
fn segment_operator(
    node: &Arc<dyn ExecutionPlan>,
) -> Option<(BackendKind, &Arc<dyn ExecutionPlan>)> {
    if let Some(filter) = node.downcast_ref::<GpuFilterExec>() {
        return Some((filter.placement(), filter.input()));
    }
    let projection = node.downcast_ref::<GpuProjectionExec>()?;
    projection
        .computes_on_device()
        .then(|| (projection.placement(), projection.input()))
}

/// The device-batch source inside a `DeviceToHostExec` child.
fn inside_download(child: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    child
        .downcast_ref::<DeviceToHostExec>()
        .map(|d2h| Arc::clone(d2h.input()))
}

/// The new children of a GPU partial aggregate that reads device batches in place of a
/// download below it (its input).
fn aggregate_reading_device_batches(
    node: &Arc<dyn ExecutionPlan>,
) -> Option<Vec<Arc<dyn ExecutionPlan>>> {
    let aggregate = node.downcast_ref::<GpuPartialAggregateExec>()?;
    if aggregate.placement() == BackendKind::CpuSimd {
        return None;
    }
    Some(vec![inside_download(aggregate.input())?])
}

/// A join's build input rewritten by `rewrite`: below a CollectLeft join's partition
/// coalescing (each partition rewritten on its own), the input itself otherwise; `None`
/// where `rewrite` does not apply.
fn rewrite_build(
    join: &GpuHashJoinExec,
    rewrite: impl Fn(&Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let left = join.left();
    let coalesced = left
        .downcast_ref::<CoalescePartitionsExec>()
        .filter(|_| join.mode() != PartitionMode::Partitioned);
    let Some(coalesce) = coalesced else {
        return Ok(rewrite(left));
    };
    let Some(inner) = rewrite(coalesce.input()) else {
        return Ok(None);
    };
    let options = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
    Ok(Some(
        Arc::clone(left).replace_children(vec![inner], options)?,
    ))
}

/// `input` uploaded for a device operator, where a device batch holds its columns.
fn upload(
    input: &Arc<dyn ExecutionPlan>,
    placement: BackendKind,
) -> Option<Arc<dyn ExecutionPlan>> {
    check_device_schema(&input.schema())
        .is_ok()
        .then(|| Arc::new(HostToDeviceExec::new(Arc::clone(input), placement)) as _)
}

/// A GPU join the device runs whole (`joins_on_device`) above device batches,
/// rewritten to read them: with at least one input handing on device batches, that
/// input's download goes (below a CollectLeft join's partition coalescing, for the build
/// side), the other input is uploaded if it is on the host, and the join hands on device
/// batches (`build=device`, `probe=device`) under a download of its own that the next
/// segment operator cancels; its build side claims its device bytes under
/// `oxidelake.memory.device_limit`. Any other join keeps the downloads under it.
fn join_reading_device_batches(
    node: &Arc<dyn ExecutionPlan>,
    device_limit: Option<usize>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(join) = node.downcast_ref::<GpuHashJoinExec>() else {
        return Ok(None);
    };
    let placement = join.placement();
    if placement == BackendKind::CpuSimd {
        return Ok(None);
    }
    let probe = inside_download(join.right());
    let build = rewrite_build(join, inside_download)?;
    let whole = join.joins_on_device()
        && check_device_schema(&node.schema()).is_ok()
        && (probe.is_some() || build.is_some());
    if !whole {
        return Ok(None);
    }
    let build = match build {
        Some(build) => Some(build),
        None => rewrite_build(join, |input| upload(input, placement))?,
    };
    let probe = probe.or_else(|| upload(join.right(), placement));
    let (Some(build), Some(probe)) = (build, probe) else {
        return Ok(None);
    };
    let joined = join.over_device_inputs(build, probe, device_limit)?;
    Ok(Some(Arc::new(DeviceToHostExec::new(
        Arc::new(joined),
        placement,
    ))))
}

impl PhysicalOptimizerRule for DeviceTransitionRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = OxideOptions::from_config(config);
        plan.transform_up(|node| {
            if let Some(joined) = join_reading_device_batches(&node, options.device_limit)? {
                return Ok(Transformed::yes(joined));
            }
            if let Some(children) = aggregate_reading_device_batches(&node) {
                let node = node.replace_children(
                    children,
                    ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
                )?;
                return Ok(Transformed::yes(node));
            }
            let Some((placement, input)) = segment_operator(&node) else {
                return Ok(Transformed::no(node));
            };
            let fits = placement != BackendKind::CpuSimd
                && check_device_schema(&input.schema()).is_ok()
                && check_device_schema(&node.schema()).is_ok();
            if !fits {
                return Ok(Transformed::no(node));
            }
            let input = segment_input(input, placement);
            let segment = Arc::clone(&node).replace_children(
                vec![input],
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
            )?;
            Ok(Transformed::yes(Arc::new(DeviceToHostExec::new(
                segment, placement,
            ))))
        })
        .data()
    }

    fn name(&self) -> &str {
        Self::NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_plan::displayable;
    use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal, Predicate};

    fn scan(dt: DataType) -> Arc<dyn ExecutionPlan> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", dt, true),
        ]));
        MemorySourceConfig::try_new_exec(&[vec![]], schema, None).unwrap()
    }

    fn filter(input: Arc<dyn ExecutionPlan>, placement: BackendKind) -> Arc<dyn ExecutionPlan> {
        let predicate = Predicate::from(ColumnPredicate {
            column: 0,
            op: CmpOp::Gt,
            literal: Literal::Int64(1),
        });
        Arc::new(GpuFilterExec::try_new(input, vec![predicate], vec![0, 1], placement).unwrap())
    }

    fn config() -> ConfigOptions {
        let mut config = ConfigOptions::new();
        config.extensions.insert(OxideOptions::default());
        config
    }

    /// The plan's operator names, one line per node, indented by depth.
    fn shape(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
        displayable(plan.as_ref())
            .indent(false)
            .to_string()
            .lines()
            .map(|l| {
                let depth = l.len() - l.trim_start().len();
                let name = l.trim_start().split([':', ',']).next().unwrap_or_default();
                format!("{}{name}", " ".repeat(depth))
            })
            .collect()
    }

    #[test]
    fn two_device_filters_in_a_row_cross_to_the_device_once_and_back_once() {
        let plan = filter(
            filter(scan(DataType::Utf8), BackendKind::Cuda),
            BackendKind::Cuda,
        );
        let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
        assert_eq!(
            shape(&out),
            [
                "DeviceToHostExec[cuda]",
                "  GpuFilterExec[cuda]",
                "    GpuFilterExec[cuda]",
                "      HostToDeviceExec[cuda]",
                "        DataSourceExec",
            ]
        );
        assert!(oxidelake_compute::as_segment(&out.children()[0].clone()).is_some());
    }

    /// `a + a AS a2, b` over `input`, placed for cuda.
    fn projection(input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        use datafusion::logical_expr::Operator;
        use datafusion::physical_expr::expressions::{BinaryExpr, Column};
        use datafusion::physical_plan::projection::ProjectionExpr;
        let a = Arc::new(Column::new("a", 0));
        let exprs = vec![
            ProjectionExpr {
                expr: Arc::new(BinaryExpr::new(a.clone(), Operator::Plus, a)),
                alias: "a2".into(),
            },
            ProjectionExpr {
                expr: Arc::new(Column::new("b", 1)),
                alias: "b".into(),
            },
        ];
        Arc::new(GpuProjectionExec::try_new(exprs, input, BackendKind::Cuda).unwrap())
    }

    #[test]
    fn a_device_projection_above_a_device_filter_shares_its_transitions() {
        let plan = projection(filter(scan(DataType::Utf8), BackendKind::Cuda));
        let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
        assert_eq!(
            shape(&out),
            [
                "DeviceToHostExec[cuda]",
                "  GpuProjectionExec[cuda]",
                "    GpuFilterExec[cuda]",
                "      HostToDeviceExec[cuda]",
                "        DataSourceExec",
            ]
        );
        assert!(oxidelake_compute::as_segment(&out.children()[0].clone()).is_some());
    }

    /// `COUNT(*)` and `SUM(a)` grouped by `b`, partial, over `input`.
    fn partial_aggregate(
        input: Arc<dyn ExecutionPlan>,
        placement: BackendKind,
    ) -> Arc<dyn ExecutionPlan> {
        use oxidelake_compute::{AggInput, PartialAggSpec, PartialFunc};
        let schema = Arc::new(Schema::new(vec![
            Field::new("b", DataType::Utf8, true),
            Field::new("count(*)[count]", DataType::Int64, true),
            Field::new("sum(a)[sum]", DataType::Int64, true),
        ]));
        let aggregates = vec![
            PartialAggSpec {
                func: PartialFunc::Count,
                input: None,
            },
            PartialAggSpec {
                func: PartialFunc::Sum,
                input: Some(AggInput {
                    column: 0,
                    cast: None,
                }),
            },
        ];
        Arc::new(
            GpuPartialAggregateExec::try_new(input, vec![1], aggregates, schema, placement)
                .unwrap(),
        )
    }

    #[test]
    fn a_device_partial_aggregate_reads_the_device_batches_and_is_the_way_back_to_the_host() {
        let plan = partial_aggregate(
            filter(scan(DataType::Utf8), BackendKind::Cuda),
            BackendKind::Cuda,
        );
        let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
        assert_eq!(
            shape(&out),
            [
                "GpuPartialAggregateExec[cuda]",
                "  GpuFilterExec[cuda]",
                "    HostToDeviceExec[cuda]",
                "      DataSourceExec",
            ]
        );
        let text = displayable(out.as_ref()).indent(false).to_string();
        assert!(text.contains("input=device"), "{text}");
        // Over host batches it goes through the host edge: no upload for it alone.
        let plain = partial_aggregate(scan(DataType::Utf8), BackendKind::Cuda);
        let before = shape(&plain);
        let out = DeviceTransitionRule.optimize(plain, &config()).unwrap();
        assert_eq!(shape(&out), before);
        // Placed for the CPU above a device filter: the filter's download stays.
        let cpu = partial_aggregate(
            filter(scan(DataType::Utf8), BackendKind::Cuda),
            BackendKind::CpuSimd,
        );
        let out = DeviceTransitionRule.optimize(cpu, &config()).unwrap();
        assert_eq!(shape(&out)[1], "  DeviceToHostExec[cuda]");
    }

    #[test]
    fn a_device_join_gives_device_batches_uploading_a_host_input_and_reads_host_batches_beside_one_it_cannot_hold()
     {
        let join = |build: Arc<dyn ExecutionPlan>, probe: Arc<dyn ExecutionPlan>| {
            Arc::new(GpuHashJoinExec::try_new(build, probe, 0, 0, BackendKind::Cuda).unwrap())
                as Arc<dyn ExecutionPlan>
        };
        let plan = join(
            filter(scan(DataType::Utf8), BackendKind::Cuda),
            filter(scan(DataType::Utf8), BackendKind::Cuda),
        );
        let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
        assert_eq!(
            shape(&out),
            [
                "DeviceToHostExec[cuda]",
                "  GpuHashJoinExec[cuda]",
                "    GpuFilterExec[cuda]",
                "      HostToDeviceExec[cuda]",
                "        DataSourceExec",
                "    GpuFilterExec[cuda]",
                "      HostToDeviceExec[cuda]",
                "        DataSourceExec",
            ]
        );
        let text = displayable(out.as_ref()).indent(false).to_string();
        assert!(text.contains("probe=device, build=device"), "{text}");
        // A build side on the host is uploaded for it: each scan crosses once.
        let plan = join(
            scan(DataType::Utf8),
            filter(scan(DataType::Utf8), BackendKind::Cuda),
        );
        let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
        assert_eq!(
            shape(&out),
            [
                "DeviceToHostExec[cuda]",
                "  GpuHashJoinExec[cuda]",
                "    HostToDeviceExec[cuda]",
                "      DataSourceExec",
                "    GpuFilterExec[cuda]",
                "      HostToDeviceExec[cuda]",
                "        DataSourceExec",
            ]
        );
        // One a device batch cannot hold (a UInt64 column) stays on the host, and so does
        // the join: the probe side's download stays under it.
        let plan = join(
            scan(DataType::UInt64),
            filter(scan(DataType::Utf8), BackendKind::Cuda),
        );
        let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
        assert_eq!(
            shape(&out),
            [
                "GpuHashJoinExec[cuda]",
                "  DataSourceExec",
                "  DeviceToHostExec[cuda]",
                "    GpuFilterExec[cuda]",
                "      HostToDeviceExec[cuda]",
                "        DataSourceExec",
            ]
        );
        let text = displayable(out.as_ref()).indent(false).to_string();
        assert!(!text.contains("=device"), "{text}");
    }

    #[test]
    fn on_the_cpu_or_with_a_column_the_device_cannot_hold_nothing_changes() {
        let cases = [
            filter(scan(DataType::Utf8), BackendKind::CpuSimd),
            filter(scan(DataType::UInt64), BackendKind::Cuda),
        ];
        for plan in cases {
            let before = shape(&plan);
            let out = DeviceTransitionRule.optimize(plan, &config()).unwrap();
            assert_eq!(shape(&out), before);
        }
    }

    #[test]
    fn a_gpu_filter_placed_for_cuda_gets_its_transitions_without_any_option() {
        let plan = filter(scan(DataType::Utf8), BackendKind::Cuda);
        let out = DeviceTransitionRule
            .optimize(plan, &ConfigOptions::new())
            .unwrap();
        let text = displayable(out.as_ref()).indent(false).to_string();
        assert!(
            text.contains("DeviceToHostExec") && text.contains("HostToDeviceExec"),
            "{text}"
        );
    }
}
