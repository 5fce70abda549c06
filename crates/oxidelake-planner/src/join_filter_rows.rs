//! `JoinFilterRowsRule`: puts a [`JoinFilterExec`] on every Parquet scan that receives a
//! hash join's dynamic filter, so the rows the join cannot match are dropped where they
//! are read instead of being repartitioned and probed.
//!
//! DataFusion 55 hands a hash join's dynamic filter down the probe side to the scans.
//! With `datafusion.execution.parquet.pushdown_filters` off (the lake default), a scan
//! uses it only to skip row groups by statistics, which skips nothing when the keys are
//! not clustered. Turning pushdown on evaluates the query's static filters in the
//! decoder as well, which made 15 of the 22 TPC-H queries slower here; pushing only the
//! dynamic filters into the decoder made Q3, Q5 and Q9 1.3–1.9× slower, with no way
//! to stop a filter that does not pay (docs/benchmarks.md). [`JoinFilterExec`]
//! evaluates the dynamic filters after decoding instead, and stops where its first rows
//! show the filter keeps most of them.
//!
//! The node goes on a `FilterExec` (or a `GpuFilterExec` placed for the CPU) right above
//! the scan when there is one, so the static filter runs first and the dynamic one sees
//! fewer rows; otherwise on the scan. Under a `GpuFilterExec` the transition rule puts
//! between device transitions (placed on a device, over columns a device batch holds) it
//! stays on the scan, so that the rows it drops are not uploaded and
//! no batch crosses back to the host between the GPU filter and the next GPU operator
//! (device-resident batches are the only device path, issue #45). The cost: where the
//! plan placed for a GPU runs on the CPU backend, the dynamic filter checks every scanned
//! row, not only those the static filter keeps (TPC-H Q20 before issue #45: all 6
//! million lineitem rows instead of 0.9 million, 183 ms against 33 ms).
//! The scan keeps its predicate for pruning. The rule runs last, after DataFusion's
//! post-optimisation filter pushdown has put the dynamic filters into the scans, and not
//! when `pushdown_filters` is on (the decoder applies them then). Off with
//! `SET oxidelake.scan.join_filter_rows = false`; `oxidelake.scan.join_filter_max_kept`
//! sets the fraction of its sample a filter may keep and go on filtering, and
//! `oxidelake.scan.join_filter_partitioned` whether Partitioned-mode joins' filters are
//! applied as well (off: on TPC-H they cost about what they spare, except where the
//! join aggregates its probe rows above the scan, where they are applied anyway).
//! A filter over a float key is not applied to rows: DataFusion's `IN` list in it
//! compares bit patterns, so it would drop a `-0.0` that the join matches with `0.0`
//! (`keys_a_float`, `docs/upstream-defects.md`).

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::Schema;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use oxidelake_compute::device_batch::check_device_schema;
use oxidelake_compute::{GpuFilterExec, JoinFilterExec};
use oxidelake_core::BackendKind;

use crate::OxideOptions;

/// See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct JoinFilterRowsRule;

impl JoinFilterRowsRule {
    /// The name DataFusion lists the rule under.
    pub const NAME: &'static str = "join_filter_rows";
}

/// Whether the transition rule will put `filter` between device transitions: placed on
/// a device, over columns a device batch can hold (the rule's own test).
fn between_transitions(filter: &GpuFilterExec) -> bool {
    filter.placement() != BackendKind::CpuSimd
        && check_device_schema(&filter.input().schema()).is_ok()
        && check_device_schema(&filter.schema()).is_ok()
}

impl PhysicalOptimizerRule for JoinFilterRowsRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = OxideOptions::from_config(config);
        if config.execution.parquet.pushdown_filters || !options.join_filter_rows {
            return Ok(plan);
        }
        let max_kept = options.join_filter_max_kept();
        let aggregated = filters_through_aggregates(&plan);
        plan.transform_down(|node| {
            // A filter over such a scan takes the node above itself; the scan below is
            // then left alone.
            // A GPU filter placed on a device gets the filter below it, on the scan: the
            // transition rule, run after this one, puts the upload above it.
            let filtered = match (
                node.downcast_ref::<FilterExec>(),
                node.downcast_ref::<GpuFilterExec>(),
            ) {
                (Some(filter), _) => Some(filter.input()),
                (None, Some(filter)) if !between_transitions(filter) => Some(filter.input()),
                _ => None,
            };
            let scan = filtered.unwrap_or(&node);
            let Some(filters) = dynamic_filters(scan) else {
                return Ok(Transformed::no(node));
            };
            let Some(filters) = remapped(filters, &node.schema()) else {
                return Ok(Transformed::no(node));
            };
            let pay = filters
                .iter()
                .map(|f| f.expression_id().is_some_and(|id| aggregated.contains(&id)))
                .collect();
            let wrapped: Arc<dyn ExecutionPlan> = Arc::new(
                JoinFilterExec::try_new(node, filters, max_kept)?
                    .with_partitioned(options.join_filter_partitioned)
                    .with_lookups_that_pay(pay),
            );
            Ok(Transformed::new(wrapped, true, TreeNodeRecursion::Jump))
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

/// The `expression_id`s of the dynamic filters of hash joins whose probe side holds an
/// aggregate: such a filter reaches its scans through the aggregate, so each row it
/// drops spares an aggregation as well as a repartition and a probe, and its
/// Partitioned-mode lookups are applied even when those are off (TPC-H Q20 1.5× slower
/// without them; Q3, whose lookups feed a repartition only, 0.85×).
fn filters_through_aggregates(plan: &Arc<dyn ExecutionPlan>) -> HashSet<u64> {
    let mut ids = HashSet::new();
    let visited = plan.apply(|node| {
        if let Some(join) = node.downcast_ref::<HashJoinExec>()
            && join
                .right()
                .exists(|n| Ok(n.downcast_ref::<AggregateExec>().is_some()))?
        {
            ids.extend(
                join.dynamic_expressions_produced()
                    .iter()
                    .filter_map(|f| f.expression_id()),
            );
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if let Err(e) = visited {
        tracing::debug!(error = %e, "join filters: could not walk the plan for aggregates");
    }
    ids
}

/// The dynamic filters in the predicate of `node`, if it is a Parquet scan without
/// row-level pushdown.
fn dynamic_filters(node: &Arc<dyn ExecutionPlan>) -> Option<Vec<Arc<dyn PhysicalExpr>>> {
    let scan = node.downcast_ref::<DataSourceExec>()?;
    let files: &dyn Any = scan.data_source().as_ref();
    let files = files.downcast_ref::<FileScanConfig>()?;
    let parquet: &dyn Any = files.file_source().as_ref();
    if parquet
        .downcast_ref::<ParquetSource>()?
        .table_parquet_options()
        .global
        .pushdown_filters
    {
        return None;
    }
    let predicate = files.file_source().filter()?;
    let schema = node.schema();
    let dynamic: Vec<Arc<dyn PhysicalExpr>> = split_conjunction(&predicate)
        .into_iter()
        .filter(|e| e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some())
        .filter(|e| !keys_a_float(e, &schema))
        .cloned()
        .collect();
    (!dynamic.is_empty()).then_some(dynamic)
}

/// Whether the dynamic filter `filter` reads a float column of `schema`. Its join holds
/// `-0.0 = 0.0`, but DataFusion 55.2 fills the filter of a small build side with an `IN`
/// list that compares bit patterns (`docs/upstream-defects.md`), so applied to rows it
/// would drop a `-0.0` the join matches with `0.0`. Such a filter is left to the scan's
/// row-group pruning, which compares by value.
fn keys_a_float(filter: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    filter
        .exists(|e| {
            Ok(e.downcast_ref::<Column>().is_some_and(|column| {
                schema
                    .field_with_name(column.name())
                    .is_ok_and(|f| f.data_type().is_floating())
            }))
        })
        // The walk itself cannot fail; if it did, the filter is not applied to rows.
        .unwrap_or(true)
}

/// `filters` with their columns those of `schema` (matched by name: the scan's predicate
/// may address the table's columns rather than the projected ones); `None` if a column
/// is missing there.
fn remapped(
    filters: Vec<Arc<dyn PhysicalExpr>>,
    schema: &Schema,
) -> Option<Vec<Arc<DynamicFilterPhysicalExpr>>> {
    filters
        .into_iter()
        .map(|filter| {
            let filter = filter
                .transform(|e| {
                    let Some(column) = e.downcast_ref::<Column>() else {
                        return Ok(Transformed::no(e));
                    };
                    let index = schema.index_of(column.name())?;
                    Ok(Transformed::yes(
                        Arc::new(Column::new(column.name(), index)) as Arc<dyn PhysicalExpr>,
                    ))
                })
                .data()
                .ok()?;
            Arc::downcast::<DynamicFilterPhysicalExpr>(filter as Arc<dyn Any + Send + Sync>).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};
    use datafusion::physical_expr::expressions::lit;

    #[test]
    fn a_dynamic_filter_over_a_float_key_is_not_applied_to_rows() {
        let schema = Schema::new(vec![
            Field::new("f", DataType::Float64, true),
            Field::new("k", DataType::Int64, true),
        ]);
        let filter_on = |name: &str, index: usize| -> Arc<dyn PhysicalExpr> {
            Arc::new(DynamicFilterPhysicalExpr::new(
                vec![Arc::new(Column::new(name, index)) as Arc<dyn PhysicalExpr>],
                lit(true),
            ))
        };
        assert!(keys_a_float(&filter_on("f", 0), &schema));
        assert!(!keys_a_float(&filter_on("k", 1), &schema));
    }
}
