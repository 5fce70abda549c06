//! AggregateExec → GpuAggregateExec: SUM/COUNT/MIN/MAX over Int64/Float64 grouped by one
//! Int64 column.
//!
//! DataFusion splits a grouped aggregate into a partial and a final AggregateExec. The
//! GPU operator does both steps itself (per-batch partials, merged at the end), so the
//! final node is replaced together with its partial, and a single-mode node directly.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use oxidelake_compute::GpuAggregateExec;
use oxidelake_compute::ops::{AggFunc, AggSpec};
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    let agg = node.downcast_ref::<AggregateExec>()?;
    match agg.mode() {
        // A partial is replaced with its final; only say why when it cannot be.
        AggregateMode::Partial | AggregateMode::PartialReduce => {
            coverage(agg).err().map(Placement::Cpu)
        }
        AggregateMode::Single | AggregateMode::SinglePartitioned => {
            Some(match rewrite(agg, agg, backend) {
                Ok(plan) => Placement::Rewrite(plan),
                Err(reason) => Placement::Cpu(reason),
            })
        }
        AggregateMode::Final | AggregateMode::FinalPartitioned => {
            let Some(partial) = partial_below(agg.input()) else {
                return Some(Placement::Cpu("final aggregate without its partial".into()));
            };
            Some(match rewrite(partial, agg, backend) {
                Ok(plan) => Placement::Rewrite(plan),
                Err(reason) => Placement::Cpu(reason),
            })
        }
    }
}

/// The partial aggregate feeding a final one, through repartitions and coalesces.
fn partial_below(plan: &Arc<dyn ExecutionPlan>) -> Option<&AggregateExec> {
    let mut node = plan;
    loop {
        if let Some(agg) = node.downcast_ref::<AggregateExec>() {
            return matches!(agg.mode(), AggregateMode::Partial).then_some(agg);
        }
        if node.is::<RepartitionExec>() || node.is::<CoalescePartitionsExec>() {
            node = node.children().first().copied()?;
            continue;
        }
        return None;
    }
}

/// The group column and aggregates of `agg` (read against its input), or why not.
fn coverage(agg: &AggregateExec) -> Result<(usize, Vec<AggSpec>), String> {
    let input_schema = agg.input_schema();
    let group_by = agg.group_expr();
    if group_by.has_grouping_set() {
        return Err("grouping sets".into());
    }
    let keys = group_by.expr();
    if keys.len() != 1 {
        return Err(match keys.len() {
            0 => "no GROUP BY key".into(),
            n => format!("{n} group keys"),
        });
    }
    let key = keys[0]
        .0
        .downcast_ref::<Column>()
        .ok_or_else(|| "group key is an expression".to_string())?;
    let key_type = input_schema.field(key.index()).data_type();
    if key_type != &DataType::Int64 {
        return Err(format!("group key on {key_type}"));
    }
    if agg.filter_expr().iter().any(Option::is_some) {
        return Err("aggregate FILTER clause".into());
    }
    if agg.limit_options().is_some() {
        return Err("aggregate with a limit".into());
    }
    let mut specs = Vec::with_capacity(agg.aggr_expr().len());
    for expr in agg.aggr_expr() {
        let name = expr.fun().name().to_ascii_lowercase();
        if expr.is_distinct() {
            return Err(format!("{name}(DISTINCT)"));
        }
        let func = match name.as_str() {
            "sum" => AggFunc::Sum,
            "count" => AggFunc::Count,
            "min" => AggFunc::Min,
            "max" => AggFunc::Max,
            other => return Err(format!("{other}()")),
        };
        let args = expr.expressions();
        let column = match args.as_slice() {
            [arg] => arg.downcast_ref::<Column>().ok_or_else(|| {
                if name == "count" {
                    "count of an expression (e.g. COUNT(*))".to_string()
                } else {
                    format!("{name} of an expression")
                }
            })?,
            _ => return Err(format!("{name} with {} arguments", args.len())),
        };
        let dt = input_schema.field(column.index()).data_type();
        if !matches!(dt, DataType::Int64 | DataType::Float64) {
            return Err(format!("{name} over {dt}"));
        }
        specs.push(AggSpec {
            func,
            column: column.index(),
        });
    }
    Ok((key.index(), specs))
}

/// Replaces `top` (final or single) with a GPU aggregate over `source`'s input.
fn rewrite(
    source: &AggregateExec,
    top: &AggregateExec,
    backend: BackendKind,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    let (group_column, specs) = coverage(source)?;
    let gpu = GpuAggregateExec::try_new(Arc::clone(source.input()), group_column, specs, backend)
        .and_then(|g| g.with_output_schema(top.schema()))
        .map_err(reason_of)?;
    Ok(Arc::new(gpu))
}
