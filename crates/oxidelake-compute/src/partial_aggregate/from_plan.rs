//! Building a `GpuPartialAggregateExec` from the DataFusion partial aggregate it
//! replaces: keys must be columns; each aggregate is SUM (DataFusion's, or OxideLake's
//! checked one with its two-field state) / COUNT / MIN / MAX / AVG, not
//! DISTINCT, without FILTER, of one argument. A column or a cast of one is read directly;
//! COUNT of a non-null literal is COUNT(*); any other argument expression is computed by
//! a projection put below the device operator: a `GpuProjectionExec` when it is
//! arithmetic the device covers, a stock one otherwise (visible in EXPLAIN).

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use oxidelake_core::{BackendKind, EngineError};

use crate::GpuProjectionExec;

use super::{AggInput, GpuPartialAggregateExec, PartialAggSpec, PartialFunc};

impl GpuPartialAggregateExec {
    /// The device operator standing for `partial` (a `Partial`-mode aggregate), placed
    /// for `placement`, over `partial`'s input (or a projection of it computing argument
    /// expressions). `Unsupported` names what is not covered, in a few words.
    pub fn try_replacing(partial: &AggregateExec, placement: BackendKind) -> Result<Self> {
        let unsupported =
            |detail: String| EngineError::unsupported("GpuPartialAggregateExec", detail);
        let mut parts = partial_parts(partial).map_err(unsupported)?;
        let input =
            with_computed_arguments(partial.input(), &mut parts, placement).map_err(unsupported)?;
        GpuPartialAggregateExec::try_new(
            input,
            parts.keys,
            parts.specs,
            partial.schema(),
            placement,
        )
    }
}

/// What a device partial aggregate is built from.
struct PartialParts {
    /// Key columns of the input.
    keys: Vec<usize>,
    /// The aggregates; an argument column at or beyond the input's width is one of
    /// `computed`.
    specs: Vec<PartialAggSpec>,
    /// Argument expressions a stock projection below the device operator evaluates.
    computed: Vec<Arc<dyn PhysicalExpr>>,
}

/// The key columns and aggregate specs of a partial (or single) aggregate, read against
/// its input, or why it is not covered.
fn partial_parts(agg: &AggregateExec) -> Result<PartialParts, String> {
    let width = agg.input().schema().fields().len();
    let group_by = agg.group_expr();
    if group_by.has_grouping_set() {
        return Err("grouping sets".into());
    }
    let keys = group_by
        .expr()
        .iter()
        .map(|(expr, _)| {
            expr.downcast_ref::<Column>()
                .map(Column::index)
                .ok_or_else(|| "group key is an expression".to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    if agg.filter_expr().iter().any(Option::is_some) {
        return Err("aggregate FILTER clause".into());
    }
    if agg.limit_options().is_some() {
        return Err("aggregate with a limit".into());
    }
    let mut specs = Vec::with_capacity(agg.aggr_expr().len());
    let mut computed = Vec::new();
    for expr in agg.aggr_expr() {
        let name = expr.fun().name().to_ascii_lowercase();
        if expr.is_distinct() {
            return Err(format!("{name}(DISTINCT)"));
        }
        let func = match name.as_str() {
            // OxideLake's checked `sum` declares a second state field, its wrap count
            // (`crate::checked_sum`); DataFusion's `sum`, and the checked one over
            // floats, the sum alone.
            "sum" if expr.state_fields().map_err(|e| e.to_string())?.len() == 2 => {
                PartialFunc::CheckedSum
            }
            "sum" => PartialFunc::Sum,
            "count" => PartialFunc::Count,
            "min" => PartialFunc::Min,
            "max" => PartialFunc::Max,
            "avg" => PartialFunc::Avg,
            other => return Err(format!("{other}()")),
        };
        let args = expr.expressions();
        let [arg] = args.as_slice() else {
            return Err(format!("{name} with {} arguments", args.len()));
        };
        let input = if let Some(column) = arg.downcast_ref::<Column>() {
            Some(AggInput {
                column: column.index(),
                cast: None,
            })
        } else if let Some(cast) = arg.downcast_ref::<CastExpr>()
            && let Some(column) = cast.expr().downcast_ref::<Column>()
        {
            Some(AggInput {
                column: column.index(),
                cast: Some(cast.cast_type().clone()),
            })
        } else if func == PartialFunc::Count
            && arg
                .downcast_ref::<Literal>()
                .is_some_and(|l| !l.value().is_null())
        {
            // COUNT(*) (DataFusion writes COUNT(1)): every row counts.
            None
        } else {
            // An argument such as `price * (1 - discount)`: a stock projection below the
            // device operator computes it (on the CPU, visible in EXPLAIN) and the device
            // aggregates the resulting column.
            computed.push(Arc::clone(arg));
            Some(AggInput {
                column: width + computed.len() - 1,
                cast: None,
            })
        };
        specs.push(PartialAggSpec { func, input });
    }
    Ok(PartialParts {
        keys,
        specs,
        computed,
    })
}

/// `input` projected to the columns `parts` reads, with its `computed` argument
/// expressions appended (`input` itself when there are none), and `parts`' column
/// indices moved to that projection. The projection is computed on the device when its
/// expressions are arithmetic the device covers ([`GpuProjectionExec`]), by a stock
/// projection otherwise. Columns neither a key nor an argument are left out: each would
/// be one more copy per batch on a device and one more column in every batch.
fn with_computed_arguments(
    input: &Arc<dyn ExecutionPlan>,
    parts: &mut PartialParts,
    placement: BackendKind,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    if parts.computed.is_empty() {
        return Ok(Arc::clone(input));
    }
    let schema = input.schema();
    let width = schema.fields().len();
    // The input columns the keys and the other arguments read, in input order.
    let mut used: Vec<usize> = parts
        .keys
        .iter()
        .copied()
        .chain(
            parts
                .specs
                .iter()
                .filter_map(|s| s.input.as_ref().map(|i| i.column)),
        )
        .filter(|c| *c < width)
        .collect();
    used.sort_unstable();
    used.dedup();
    let moved = |c: usize| match used.iter().position(|u| *u == c) {
        Some(at) => at,
        // A computed argument: after the kept columns.
        None => used.len() + (c - width),
    };
    for key in &mut parts.keys {
        *key = moved(*key);
    }
    for spec in &mut parts.specs {
        if let Some(input) = spec.input.as_mut() {
            input.column = moved(input.column);
        }
    }
    let mut exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = used
        .iter()
        .map(|i| {
            let name = schema.field(*i).name();
            (
                Arc::new(Column::new(name, *i)) as Arc<dyn PhysicalExpr>,
                name.clone(),
            )
        })
        .collect();
    for (i, expr) in parts.computed.iter().enumerate() {
        exprs.push((Arc::clone(expr), format!("__oxide_agg_arg_{i}")));
    }
    let exprs: Vec<ProjectionExpr> = exprs
        .into_iter()
        .map(|(expr, alias)| ProjectionExpr { expr, alias })
        .collect();
    if let Ok(device) = GpuProjectionExec::try_new(exprs.clone(), Arc::clone(input), placement) {
        return Ok(Arc::new(device));
    }
    let projection =
        ProjectionExec::try_new(exprs, Arc::clone(input)).map_err(|e| e.to_string())?;
    Ok(Arc::new(projection))
}
