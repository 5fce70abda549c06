//! FilterExec → GpuFilterExec: comparisons of a column with a literal or with another
//! column, IN lists, LIKE and NULL tests under AND / OR / NOT, over the types
//! [`value_class`] covers.
//!
//! For a device target the predicate must also compile to a device program (no LIKE
//! with `_` or escapes, no comparison of two string columns); otherwise the filter stays
//! on the CPU and EXPLAIN says why.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal as LiteralExpr,
    NotExpr,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use oxidelake_compute::GpuFilterExec;
use oxidelake_compute::ops::{
    CmpOp, ColumnPredicate, DeviceProgram, Literal, Predicate, ValueClass, value_class,
    wide_decimal,
};
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

/// IN lists longer than this stay on the CPU (each value is one comparison on the
/// device; DataFusion uses a hash set for long lists).
const MAX_IN_LIST: usize = 64;

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
    let predicates = split(filter.predicate(), Operator::And)
        .into_iter()
        .map(|expr| predicate(expr, &schema))
        .collect::<Result<Vec<_>, _>>()?;
    if backend != BackendKind::CpuSimd {
        DeviceProgram::compile(&schema, &predicates).map_err(|e| device_reason(&e))?;
    }
    let projection = match filter.projection() {
        Some(p) => p.to_vec(),
        None => (0..schema.fields().len()).collect(),
    };
    let gpu = GpuFilterExec::try_new(input, predicates, projection, backend).map_err(reason_of)?;
    Ok(Arc::new(gpu))
}

/// The `detail` of an `Unsupported` error, as a short reason.
fn device_reason(err: &oxidelake_core::EngineError) -> String {
    match err {
        oxidelake_core::EngineError::Unsupported { detail, .. } => detail.clone(),
        other => other.to_string(),
    }
}

/// The operands of a chain of `op` (AND or OR) in `expr`, flattened.
fn split(expr: &Arc<dyn PhysicalExpr>, op: Operator) -> Vec<&Arc<dyn PhysicalExpr>> {
    match expr.downcast_ref::<BinaryExpr>() {
        Some(b) if *b.op() == op => {
            let mut out = split(b.left(), op);
            out.extend(split(b.right(), op));
            out
        }
        _ => vec![expr],
    }
}

/// A DataFusion predicate as a [`Predicate`], or why it cannot be one.
pub(crate) fn predicate(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Predicate, String> {
    if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
        return match binary.op() {
            Operator::And => Ok(Predicate::And(
                split(expr, Operator::And)
                    .into_iter()
                    .map(|e| predicate(e, schema))
                    .collect::<Result<_, _>>()?,
            )),
            Operator::Or => Ok(Predicate::Or(
                split(expr, Operator::Or)
                    .into_iter()
                    .map(|e| predicate(e, schema))
                    .collect::<Result<_, _>>()?,
            )),
            _ => comparison(binary, schema),
        };
    }
    if let Some(not) = expr.downcast_ref::<NotExpr>() {
        return Ok(Predicate::Not(Box::new(predicate(not.arg(), schema)?)));
    }
    if let Some(e) = expr.downcast_ref::<IsNullExpr>() {
        return Ok(Predicate::IsNull {
            column: column_index(e.arg(), schema)?,
            negated: false,
        });
    }
    if let Some(e) = expr.downcast_ref::<IsNotNullExpr>() {
        return Ok(Predicate::IsNull {
            column: column_index(e.arg(), schema)?,
            negated: true,
        });
    }
    if let Some(list) = expr.downcast_ref::<InListExpr>() {
        return in_list(list, schema);
    }
    if let Some(column) = expr.downcast_ref::<Column>() {
        // A boolean column used as a predicate: `WHERE flag`.
        if schema.field(column.index()).data_type() == &DataType::Boolean {
            return Ok(Predicate::Compare(ColumnPredicate {
                column: column.index(),
                op: CmpOp::Eq,
                literal: Literal::Int64(1),
            }));
        }
    }
    if let Some(like) = expr.downcast_ref::<LikeExpr>() {
        if like.case_insensitive() {
            return Err("ILIKE".into());
        }
        let column = column_index(like.expr(), schema)?;
        if value_class(schema.field(column).data_type()) != Some(ValueClass::Str) {
            return Err(format!("LIKE on {}", schema.field(column).data_type()));
        }
        let pattern = like
            .pattern()
            .downcast_ref::<LiteralExpr>()
            .and_then(|l| match l.value() {
                ScalarValue::Utf8(Some(p))
                | ScalarValue::LargeUtf8(Some(p))
                | ScalarValue::Utf8View(Some(p)) => Some(p.clone()),
                _ => None,
            })
            .ok_or_else(|| "LIKE pattern is not a string literal".to_string())?;
        return Ok(Predicate::Like {
            column,
            pattern,
            negated: like.negated(),
        });
    }
    Err(format!("predicate {expr} is not a comparison"))
}

fn column_index(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<usize, String> {
    let column = expr
        .downcast_ref::<Column>()
        .ok_or_else(|| format!("{expr} is not a column"))?;
    covered_type(schema, column.index())?;
    Ok(column.index())
}

fn covered_type(schema: &Schema, index: usize) -> Result<&DataType, String> {
    let dt = schema
        .fields()
        .get(index)
        .map(|f| f.data_type())
        .ok_or_else(|| format!("column {index} out of range"))?;
    value_class(dt).ok_or_else(|| format!("predicate on {dt}"))?;
    Ok(dt)
}

/// `x IN (a, b, ...)` is `x = a OR x = b ...`; `x NOT IN (...)` is `x != a AND ...`.
/// Both equal SQL's IN in three-valued logic when no list value is NULL (checked).
fn in_list(list: &InListExpr, schema: &Schema) -> Result<Predicate, String> {
    let column = column_index(list.expr(), schema)?;
    let dt = covered_type(schema, column)?;
    if list.list().len() > MAX_IN_LIST {
        return Err(format!(
            "IN list of {} values (at most {MAX_IN_LIST})",
            list.list().len()
        ));
    }
    let op = if list.negated() {
        CmpOp::NotEq
    } else {
        CmpOp::Eq
    };
    let leaves = list
        .list()
        .iter()
        .map(|item| {
            let lit = item
                .downcast_ref::<LiteralExpr>()
                .ok_or_else(|| "IN list value is not a literal".to_string())?;
            Ok(Predicate::Compare(ColumnPredicate {
                column,
                op,
                literal: literal(lit.value(), dt)?,
            }))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(if list.negated() {
        Predicate::And(leaves)
    } else {
        Predicate::Or(leaves)
    })
}

/// `column op literal` (or `literal op column`), or `column op column` of one type.
fn comparison(binary: &BinaryExpr, schema: &Schema) -> Result<Predicate, String> {
    let op = match binary.op() {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::NotEq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        other => return Err(format!("operator {other}")),
    };
    let (left, right) = (binary.left(), binary.right());
    let (column, lit, op) = match (
        left.downcast_ref::<Column>(),
        right.downcast_ref::<LiteralExpr>(),
        right.downcast_ref::<Column>(),
        left.downcast_ref::<LiteralExpr>(),
    ) {
        (Some(c), Some(l), _, _) => (c, l, op),
        (_, _, Some(c), Some(l)) => (c, l, op.flipped()),
        _ => {
            let (Some(l), Some(r)) = (
                left.downcast_ref::<Column>(),
                right.downcast_ref::<Column>(),
            ) else {
                return Err("comparison is not column vs literal or column".into());
            };
            let (lt, rt) = (
                covered_type(schema, l.index())?,
                covered_type(schema, r.index())?,
            );
            if lt != rt {
                return Err(format!("comparison of {lt} with {rt}"));
            }
            if wide_decimal(lt) {
                return Err(format!("comparison of two {lt} columns"));
            }
            return Ok(Predicate::CompareColumns {
                left: l.index(),
                op,
                right: r.index(),
            });
        }
    };
    let dt = covered_type(schema, column.index())?;
    Ok(Predicate::Compare(ColumnPredicate {
        column: column.index(),
        op,
        literal: literal(lit.value(), dt)?,
    }))
}

/// A literal of the column's own type (DataFusion's type coercion has made them equal;
/// anything else stays on the CPU rather than being cast here).
pub(crate) fn literal(value: &ScalarValue, column_type: &DataType) -> Result<Literal, String> {
    if value.is_null() {
        return Err("comparison with NULL".into());
    }
    let value_type = value.data_type();
    let same = &value_type == column_type
        || matches!(column_type, DataType::Dictionary(_, v) if v.as_ref() == &value_type)
        || matches!((&value_type, column_type), (DataType::Dictionary(_, a), DataType::Dictionary(_, b)) if a == b);
    if !same {
        return Err(format!(
            "literal of type {value_type} against a {column_type} column"
        ));
    }
    let class = value_class(column_type).ok_or_else(|| format!("predicate on {column_type}"))?;
    scalar_literal(value, class).ok_or_else(|| format!("literal {value} of type {value_type}"))
}

fn scalar_literal(value: &ScalarValue, class: ValueClass) -> Option<Literal> {
    use ScalarValue as S;
    let int = |v: Option<i64>| v.map(Literal::Int64);
    match (value, class) {
        (S::Dictionary(_, inner), _) => scalar_literal(inner, class),
        (S::Int8(v), _) => int(v.map(i64::from)),
        (S::Int16(v), _) => int(v.map(i64::from)),
        (S::Int32(v), _) => int(v.map(i64::from)),
        (S::Int64(v), _) => int(*v),
        (S::UInt8(v), _) => int(v.map(i64::from)),
        (S::UInt16(v), _) => int(v.map(i64::from)),
        (S::UInt32(v), _) => int(v.map(i64::from)),
        (S::Boolean(v), _) => int(v.map(i64::from)),
        (S::Date32(v), _) => int(v.map(i64::from)),
        (S::Date64(v), _) => int(*v),
        (S::Time32Second(v) | S::Time32Millisecond(v), _) => int(v.map(i64::from)),
        (S::Time64Microsecond(v) | S::Time64Nanosecond(v), _) => int(*v),
        (
            S::TimestampSecond(v, _)
            | S::TimestampMillisecond(v, _)
            | S::TimestampMicrosecond(v, _)
            | S::TimestampNanosecond(v, _),
            _,
        ) => int(*v),
        (
            S::DurationSecond(v)
            | S::DurationMillisecond(v)
            | S::DurationMicrosecond(v)
            | S::DurationNanosecond(v),
            _,
        ) => int(*v),
        (S::Decimal128(v, _, _), ValueClass::Int) => {
            v.and_then(|v| i64::try_from(v).ok()).map(Literal::Int64)
        }
        (S::Float32(v), _) => v.map(|v| Literal::Float64(f64::from(v))),
        (S::Float64(v), _) => v.map(Literal::Float64),
        (S::Utf8(v) | S::LargeUtf8(v) | S::Utf8View(v), ValueClass::Str) => {
            v.clone().map(Literal::Utf8)
        }
        _ => None,
    }
}
