//! A projection computing `array_distance(v, [..])` or `l2_distance(v, [..])` (L2), or
//! `cosine_distance(v, [..])`, over a `FixedSizeList<Float32>` column →
//! GpuVectorDistanceExec under a column-only projection.

use std::sync::Arc;

use arrow::array::{Array, Float64Array};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use oxidelake_compute::GpuVectorDistanceExec;
use oxidelake_compute::ops::DistanceMetric;
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

fn metric_of(expr: &Arc<dyn PhysicalExpr>) -> Option<(&ScalarFunctionExpr, DistanceMetric)> {
    let f = expr.downcast_ref::<ScalarFunctionExpr>()?;
    match f.name() {
        "array_distance" | "list_distance" | "l2_distance" => Some((f, DistanceMetric::L2)),
        "cosine_distance" => Some((f, DistanceMetric::Cosine)),
        _ => None,
    }
}

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    let projection = node.downcast_ref::<ProjectionExec>()?;
    let distances: Vec<usize> = projection
        .expr()
        .iter()
        .enumerate()
        .filter(|(_, p)| metric_of(&p.expr).is_some())
        .map(|(i, _)| i)
        .collect();
    if distances.is_empty() {
        return None;
    }
    Some(match rewrite(projection, &distances, backend) {
        Ok(plan) => Placement::Rewrite(plan),
        Err(reason) => Placement::Cpu(reason),
    })
}

fn query_vector(value: &ScalarValue) -> Result<Vec<f32>, String> {
    let list: Arc<dyn Array> = match value {
        ScalarValue::List(a) if a.len() == 1 => a.value(0),
        ScalarValue::FixedSizeList(a) if a.len() == 1 => a.value(0),
        ScalarValue::LargeList(a) if a.len() == 1 => a.value(0),
        other => return Err(format!("query vector is {}", other.data_type())),
    };
    let wide = arrow::compute::cast(&list, &DataType::Float64)
        .map_err(|_| format!("query vector of {}", list.data_type()))?;
    let wide = wide
        .as_any()
        .downcast_ref::<Float64Array>()
        .ok_or_else(|| "query vector is not numeric".to_string())?;
    if wide.null_count() > 0 {
        return Err("NULL inside the query vector".into());
    }
    // The GPU operator takes an f32 query; DataFusion computes with the f64 literal. A
    // value f32 cannot hold exactly would change the distances, so such a query stays
    // on the CPU.
    let narrow: Vec<f32> = wide.values().iter().map(|v| *v as f32).collect();
    if narrow
        .iter()
        .zip(wide.values().iter())
        .any(|(n, w)| f64::from(*n).to_bits() != w.to_bits())
    {
        return Err("query vector not exact in f32".into());
    }
    Ok(narrow)
}

fn rewrite(
    projection: &ProjectionExec,
    distances: &[usize],
    backend: BackendKind,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    let [at] = distances else {
        return Err(format!("{} distance expressions", distances.len()));
    };
    let exprs = projection.expr();
    if exprs
        .iter()
        .enumerate()
        .any(|(i, p)| i != *at && p.expr.downcast_ref::<Column>().is_none())
    {
        return Err("projection computes other expressions".into());
    }
    let target = &exprs[*at];
    let Some((function, metric)) = metric_of(&target.expr) else {
        return Err("not a distance function".into());
    };
    let input = Arc::clone(projection.input());
    let schema = input.schema();
    // DataFusion casts the vector column to List(Float64) for array_distance; the GPU
    // operator reads the Float32 values and accumulates in f64, which gives the same
    // result, so a cast of a plain column is looked through.
    let column_of = |e: &Arc<dyn PhysicalExpr>| -> Option<Column> {
        match e.downcast_ref::<CastExpr>() {
            Some(cast) => cast.expr().downcast_ref::<Column>().cloned(),
            None => e.downcast_ref::<Column>().cloned(),
        }
    };
    let (column, literal) = match function.args() {
        [a, b] => match (
            column_of(a),
            b.downcast_ref::<Literal>(),
            column_of(b),
            a.downcast_ref::<Literal>(),
        ) {
            (Some(c), Some(l), _, _) | (_, _, Some(c), Some(l)) => (c, l),
            _ => return Err("distance between two columns or expressions".into()),
        },
        args => return Err(format!("distance with {} arguments", args.len())),
    };
    let dt = schema.field(column.index()).data_type();
    match dt {
        DataType::FixedSizeList(item, _) if item.data_type() == &DataType::Float32 => {}
        other => return Err(format!("distance over {other}")),
    }
    let query = query_vector(literal.value())?;
    let gpu: Arc<dyn ExecutionPlan> = Arc::new(
        GpuVectorDistanceExec::try_new(
            input,
            column.index(),
            query,
            metric,
            target.alias.clone(),
            backend,
        )
        .map_err(reason_of)?,
    );
    let distance_index = schema.fields().len();
    let columns: Vec<(Arc<dyn PhysicalExpr>, String)> = exprs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let expr: Arc<dyn PhysicalExpr> = if i == *at {
                Arc::new(Column::new(&p.alias, distance_index))
            } else {
                Arc::clone(&p.expr)
            };
            (expr, p.alias.clone())
        })
        .collect();
    Ok(Arc::new(
        ProjectionExec::try_new(columns, gpu).map_err(reason_of)?,
    ))
}
