//! FilterExec → GpuFilterExec: a conjunction of `column op literal` over Int64/Float64.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal as LiteralExpr};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use oxidelake_compute::GpuFilterExec;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal};
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    let filter = node.downcast_ref::<FilterExec>()?;
    Some(match rewrite(filter, backend) {
        Ok(plan) => Placement::Rewrite(plan),
        Err(reason) => Placement::Cpu(reason),
    })
}

fn rewrite(filter: &FilterExec, backend: BackendKind) -> Result<Arc<dyn ExecutionPlan>, String> {
    if filter.fetch().is_some() {
        return Err("filter with a row limit".into());
    }
    let input = Arc::clone(filter.input());
    let schema = input.schema();
    let predicates = split_conjunction(filter.predicate())
        .into_iter()
        .map(|expr| column_predicate(expr, &schema))
        .collect::<Result<Vec<_>, _>>()?;
    let projection = match filter.projection() {
        Some(p) => p.to_vec(),
        None => (0..schema.fields().len()).collect(),
    };
    let gpu = GpuFilterExec::try_new(input, predicates, projection, backend).map_err(reason_of)?;
    Ok(Arc::new(gpu))
}

/// `column op literal` (or `literal op column`) as a [`ColumnPredicate`].
pub(crate) fn column_predicate(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<ColumnPredicate, String> {
    let Some(binary) = expr.downcast_ref::<BinaryExpr>() else {
        return Err(format!("predicate {expr} is not a comparison"));
    };
    let op = match binary.op() {
        Operator::Eq => CmpOp::Eq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        Operator::Or => return Err("OR in predicate".into()),
        other => return Err(format!("operator {other}")),
    };
    let (left, right) = (binary.left(), binary.right());
    let (column, literal, op) = match (
        left.downcast_ref::<Column>(),
        right.downcast_ref::<LiteralExpr>(),
        right.downcast_ref::<Column>(),
        left.downcast_ref::<LiteralExpr>(),
    ) {
        (Some(c), Some(l), _, _) => (c, l, op),
        (_, _, Some(c), Some(l)) => (c, l, flip(op)),
        _ => return Err("comparison is not column vs literal".into()),
    };
    let field = schema
        .fields()
        .get(column.index())
        .ok_or_else(|| format!("column {} out of range", column.index()))?;
    let literal = match (field.data_type(), literal.value()) {
        (DataType::Int64, ScalarValue::Int64(Some(v))) => Literal::Int64(*v),
        (DataType::Float64, ScalarValue::Float64(Some(v))) => Literal::Float64(*v),
        (DataType::Int64 | DataType::Float64, v) if v.is_null() => {
            return Err("comparison with NULL".into());
        }
        (DataType::Int64 | DataType::Float64, v) => {
            return Err(format!("literal of type {}", v.data_type()));
        }
        (other, _) => return Err(format!("predicate on {other}")),
    };
    Ok(ColumnPredicate {
        column: column.index(),
        op,
        literal,
    })
}

/// `lit op col` is `col flip(op) lit`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::LtEq => CmpOp::GtEq,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::GtEq => CmpOp::LtEq,
    }
}
