//! A [`Predicate`] as the DataFusion expression it stands for.
//!
//! `GpuFilterExec` derives its plan properties from the stock `FilterExec` with the
//! same predicate, so it needs the predicate as a `PhysicalExpr`: the inverse of the
//! placement rule's translation. Literals become scalars of exactly the column's type
//! (a dictionary column's literal a dictionary scalar), so DataFusion sees the same
//! comparison it planned.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, IsNotNullExpr, IsNullExpr, LikeExpr, Literal as LiteralExpr, NotExpr,
};
use oxidelake_device::ops::{CmpOp, Literal, Predicate, literal_array};

/// The AND of `predicates` (`true` when there are none).
pub(crate) fn conjunction_expr(
    predicates: &[Predicate],
    schema: &Schema,
) -> Result<Arc<dyn PhysicalExpr>> {
    combine(predicates, schema, Operator::And)
}

fn combine(children: &[Predicate], schema: &Schema, op: Operator) -> Result<Arc<dyn PhysicalExpr>> {
    let mut acc: Option<Arc<dyn PhysicalExpr>> = None;
    for child in children {
        let e = predicate_expr(child, schema)?;
        acc = Some(match acc {
            None => e,
            Some(prev) => Arc::new(BinaryExpr::new(prev, op, e)),
        });
    }
    Ok(acc.unwrap_or_else(|| {
        Arc::new(LiteralExpr::new(ScalarValue::Boolean(Some(
            op == Operator::And,
        ))))
    }))
}

fn column(schema: &Schema, index: usize) -> Arc<dyn PhysicalExpr> {
    let name = schema
        .fields()
        .get(index)
        .map(|f| f.name().as_str())
        .unwrap_or("?");
    Arc::new(Column::new(name, index))
}

fn operator(op: CmpOp) -> Operator {
    match op {
        CmpOp::Eq => Operator::Eq,
        CmpOp::NotEq => Operator::NotEq,
        CmpOp::Lt => Operator::Lt,
        CmpOp::LtEq => Operator::LtEq,
        CmpOp::Gt => Operator::Gt,
        CmpOp::GtEq => Operator::GtEq,
    }
}

/// One predicate as a boolean `PhysicalExpr` over `schema`.
pub(crate) fn predicate_expr(
    predicate: &Predicate,
    schema: &Schema,
) -> Result<Arc<dyn PhysicalExpr>> {
    Ok(match predicate {
        Predicate::Compare(p) => {
            let dt = schema.field(p.column).data_type();
            let array = literal_array(dt, &p.literal)?;
            let mut scalar = ScalarValue::try_from_array(&array, 0)?;
            if let DataType::Dictionary(key, _) = dt {
                scalar = ScalarValue::Dictionary(key.clone(), Box::new(scalar));
            }
            Arc::new(BinaryExpr::new(
                column(schema, p.column),
                operator(p.op),
                Arc::new(LiteralExpr::new(scalar)),
            ))
        }
        Predicate::CompareColumns { left, op, right } => Arc::new(BinaryExpr::new(
            column(schema, *left),
            operator(*op),
            column(schema, *right),
        )),
        Predicate::Like {
            column: c,
            pattern,
            negated,
        } => {
            let dt = schema.field(*c).data_type();
            let value_type = match dt {
                DataType::Dictionary(_, v) => v.as_ref(),
                other => other,
            };
            let array = literal_array(value_type, &Literal::Utf8(pattern.clone()))?;
            Arc::new(LikeExpr::new(
                *negated,
                false,
                column(schema, *c),
                Arc::new(LiteralExpr::new(ScalarValue::try_from_array(&array, 0)?)),
            ))
        }
        Predicate::IsNull { column: c, negated } => {
            if *negated {
                Arc::new(IsNotNullExpr::new(column(schema, *c)))
            } else {
                Arc::new(IsNullExpr::new(column(schema, *c)))
            }
        }
        Predicate::And(c) => combine(c, schema, Operator::And)?,
        Predicate::Or(c) => combine(c, schema, Operator::Or)?,
        Predicate::Not(p) => Arc::new(NotExpr::new(predicate_expr(p, schema)?)),
    })
}
