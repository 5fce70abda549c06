//! FilterExec → GpuFilterExec: comparisons of a column with a literal or with another
//! column, IN lists, LIKE and NULL tests under AND / OR / NOT, over the types
//! [`value_class`] covers.
//!
//! A comparison operand that is an expression (`price * (1 - discount) > 100`,
//! `a + b = c`) is computed first: the rule puts a `GpuProjectionExec` below the filter
//! that appends the expressions as columns, the predicate compares those, and the
//! filter's own projection drops them again, so the output is the stock filter's. An
//! expression the projection does not cover keeps the filter on the CPU, with the
//! projection's reason.
//!
//! For a device target the predicate must also compile to a device program (no LIKE
//! with `_` or escapes, no comparison of two string columns); otherwise the filter stays
//! on the CPU and EXPLAIN says why.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal as LiteralExpr,
    NotExpr,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExpr;
use oxidelake_compute::ops::{
    CmpOp, ColumnPredicate, DeviceProgram, Literal, Predicate, ValueClass, value_class,
};
use oxidelake_compute::{GpuFilterExec, GpuProjectionExec};
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
    let input_schema = input.schema();
    let mut ops = Operands::new(&input_schema);
    let predicates = split(filter.predicate(), Operator::And)
        .into_iter()
        .map(|expr| predicate(expr, &mut ops))
        .collect::<Result<Vec<_>, _>>()?;
    if backend != BackendKind::CpuSimd {
        DeviceProgram::compile(&ops.schema, &predicates).map_err(|e| device_reason(&e))?;
    }
    let projection = match filter.projection() {
        Some(p) => p.to_vec(),
        None => (0..input_schema.fields().len()).collect(),
    };
    let input = ops.computing_input(input, backend)?;
    let gpu = GpuFilterExec::try_new(input, predicates, projection, backend).map_err(reason_of)?;
    Ok(Arc::new(gpu))
}

/// The columns a predicate reads: the filter input's, then the comparison operands that
/// are expressions, computed below the filter.
struct Operands {
    /// The input's columns followed by the computed ones.
    schema: Schema,
    width: usize,
    computed: Vec<Arc<dyn PhysicalExpr>>,
}

impl Operands {
    fn new(input: &Schema) -> Self {
        Self {
            schema: input.clone(),
            width: input.fields().len(),
            computed: Vec::new(),
        }
    }

    /// The column index `expr` is computed into (an identical expression shares one).
    fn computed(&mut self, expr: &Arc<dyn PhysicalExpr>) -> Result<usize, String> {
        if let Some(at) = self
            .computed
            .iter()
            .position(|e| e.as_ref() == expr.as_ref())
        {
            return Ok(self.width + at);
        }
        let input = Schema::new(self.schema.fields()[..self.width].to_vec());
        let dt = expr.data_type(&input).map_err(|e| e.to_string())?;
        let nullable = expr.nullable(&input).map_err(|e| e.to_string())?;
        let name = format!("__oxide_filter_arg_{}", self.computed.len());
        let mut fields = self.schema.fields().to_vec();
        fields.push(Arc::new(Field::new(name, dt, nullable)));
        self.schema = Schema::new(fields);
        self.computed.push(Arc::clone(expr));
        Ok(self.schema.fields().len() - 1)
    }

    /// `input`, or a GpuProjectionExec appending the computed operands to it.
    fn computing_input(
        self,
        input: Arc<dyn ExecutionPlan>,
        backend: BackendKind,
    ) -> Result<Arc<dyn ExecutionPlan>, String> {
        if self.computed.is_empty() {
            return Ok(input);
        }
        let mut exprs: Vec<ProjectionExpr> = self.schema.fields()[..self.width]
            .iter()
            .enumerate()
            .map(|(i, f)| ProjectionExpr {
                expr: Arc::new(Column::new(f.name(), i)),
                alias: f.name().clone(),
            })
            .collect();
        for (expr, field) in self
            .computed
            .into_iter()
            .zip(&self.schema.fields()[self.width..])
        {
            exprs.push(ProjectionExpr {
                expr,
                alias: field.name().clone(),
            });
        }
        let gpu = GpuProjectionExec::try_new(exprs, input, backend).map_err(reason_of)?;
        Ok(Arc::new(gpu))
    }
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
fn predicate(expr: &Arc<dyn PhysicalExpr>, ops: &mut Operands) -> Result<Predicate, String> {
    if let Some(binary) = expr.downcast_ref::<BinaryExpr>() {
        return match binary.op() {
            Operator::And => Ok(Predicate::And(
                split(expr, Operator::And)
                    .into_iter()
                    .map(|e| predicate(e, ops))
                    .collect::<Result<_, _>>()?,
            )),
            Operator::Or => Ok(Predicate::Or(
                split(expr, Operator::Or)
                    .into_iter()
                    .map(|e| predicate(e, ops))
                    .collect::<Result<_, _>>()?,
            )),
            _ => comparison(binary, ops),
        };
    }
    if let Some(not) = expr.downcast_ref::<NotExpr>() {
        return Ok(Predicate::Not(Box::new(predicate(not.arg(), ops)?)));
    }
    let schema = &ops.schema;
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
        return in_list(list, &ops.schema);
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

/// One side of a comparison: a column (of the input, or computed below the filter) or a
/// literal.
enum Side<'a> {
    Column(usize),
    Literal(&'a ScalarValue),
}

fn side<'a>(expr: &'a Arc<dyn PhysicalExpr>, ops: &mut Operands) -> Result<Side<'a>, String> {
    if let Some(c) = expr.downcast_ref::<Column>() {
        return Ok(Side::Column(c.index()));
    }
    if let Some(l) = expr.downcast_ref::<LiteralExpr>() {
        return Ok(Side::Literal(l.value()));
    }
    Ok(Side::Column(ops.computed(expr)?))
}

/// `column op literal` (or `literal op column`), or `column op column` of one type; a
/// side that is an expression is a computed column ([`Operands`]).
fn comparison(binary: &BinaryExpr, ops: &mut Operands) -> Result<Predicate, String> {
    let op = match binary.op() {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::NotEq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        other => return Err(format!("operator {other}")),
    };
    let (left, right) = (side(binary.left(), ops)?, side(binary.right(), ops)?);
    let schema = &ops.schema;
    let (column, value, op) = match (left, right) {
        (Side::Column(c), Side::Literal(l)) => (c, l, op),
        (Side::Literal(l), Side::Column(c)) => (c, l, op.flipped()),
        (Side::Column(l), Side::Column(r)) => {
            let (lt, rt) = (covered_type(schema, l)?, covered_type(schema, r)?);
            if lt != rt {
                return Err(format!("comparison of {lt} with {rt}"));
            }
            return Ok(Predicate::CompareColumns {
                left: l,
                op,
                right: r,
            });
        }
        (Side::Literal(_), Side::Literal(_)) => {
            return Err("comparison of two literals".into());
        }
    };
    let dt = covered_type(schema, column)?;
    Ok(Predicate::Compare(ColumnPredicate {
        column,
        op,
        literal: literal(value, dt)?,
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
