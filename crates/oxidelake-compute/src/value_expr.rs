//! A DataFusion arithmetic expression as a device [`ValueColumn`], or the reason it is
//! not one.
//!
//! The translation follows DataFusion's typing node by node, so the device computes the
//! value DataFusion would: integer `+ - *` wrap in the node's type; decimal operands are
//! rescaled to the node's scale for `+` and `-`, and a product's scale is the sum of
//! its operands' (checked, exact); `f64` arithmetic is IEEE. Casts are covered where
//! they cannot fail or round: integer widening, an integer or decimal into a decimal
//! with room for every value (or of at least 19 digits, which holds every 64-bit
//! result), an integer or Float32 into Float64. `EXTRACT(YEAR FROM d)`
//! of a Date32 column is covered too (TPC-H groups by it). Everything else (a division,
//! CASE, other functions, a narrowing cast) keeps the projection on the CPU, and the
//! reason names it.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, Literal, NegativeExpr, TryCastExpr,
};
use oxidelake_device::ops::{
    Arith, ArithMode, ValueColumn, ValueExpr, is_value_input, is_value_output,
};

/// The computed column `expr` stands for over `schema`, or why it stays on the CPU.
pub(crate) fn value_column(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<ValueColumn, String> {
    let data_type = data_type(expr, schema)?;
    if !is_value_output(&data_type) {
        return Err(format!("a computed {data_type}"));
    }
    Ok(ValueColumn {
        expr: translate(expr, schema)?,
        data_type,
    })
}

fn data_type(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<DataType, String> {
    expr.data_type(schema).map_err(|e| e.to_string())
}

/// The width of an integer type and whether it is signed.
fn integer(dt: &DataType) -> Option<(u8, bool)> {
    Some(match dt {
        DataType::Int8 => (8, true),
        DataType::Int16 => (16, true),
        DataType::Int32 => (32, true),
        DataType::Int64 => (64, true),
        DataType::UInt8 => (8, false),
        DataType::UInt16 => (16, false),
        DataType::UInt32 => (32, false),
        _ => return None,
    })
}

/// Decimal digits the integer type's values can need.
fn integer_digits(bits: u8, signed: bool) -> u8 {
    match (bits, signed) {
        (8, _) => 3,
        (16, _) => 5,
        (32, _) => 10,
        _ => 19,
    }
}

fn translate(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<ValueExpr, String> {
    if let Some(c) = expr.downcast_ref::<Column>() {
        let dt = schema
            .fields()
            .get(c.index())
            .map(|f| f.data_type().clone())
            .ok_or_else(|| format!("column {} out of range", c.index()))?;
        if !is_value_input(&dt) {
            return Err(format!("arithmetic on {dt}"));
        }
        return Ok(ValueExpr::Column(c.index()));
    }
    if let Some(l) = expr.downcast_ref::<Literal>() {
        return literal(l.value());
    }
    if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
        return binary(b, data_type(expr, schema)?, schema);
    }
    if let Some(c) = expr.downcast_ref::<CastExpr>() {
        return cast(c.expr(), c.cast_type(), schema);
    }
    if let Some(c) = expr.downcast_ref::<TryCastExpr>() {
        return cast(c.expr(), c.cast_type(), schema);
    }
    if let Some(n) = expr.downcast_ref::<NegativeExpr>() {
        return negative(n.arg(), schema);
    }
    if let Some(f) = expr.downcast_ref::<ScalarFunctionExpr>()
        && let Some(year) = year_of(f, schema)
    {
        return year;
    }
    Err(if expr.is::<CaseExpr>() {
        "CASE".into()
    } else if let Some(f) = expr.downcast_ref::<ScalarFunctionExpr>() {
        format!("function {}", f.name())
    } else {
        let text = expr.to_string();
        text.chars().take(40).collect::<String>()
    })
}

/// `date_part('year', d)` (`EXTRACT(YEAR FROM d)`) of a Date32 column; `None` for any
/// other function.
fn year_of(f: &ScalarFunctionExpr, schema: &Schema) -> Option<Result<ValueExpr, String>> {
    if f.name() != "date_part" {
        return None;
    }
    let [part, date] = f.args() else {
        return None;
    };
    let part = part.downcast_ref::<Literal>()?;
    let is_year = match part.value() {
        ScalarValue::Utf8(Some(p)) | ScalarValue::Utf8View(Some(p)) => {
            p.eq_ignore_ascii_case("year")
        }
        _ => false,
    };
    if !is_year {
        return None;
    }
    let Some(column) = date.downcast_ref::<Column>() else {
        return Some(Err("the year of an expression".into()));
    };
    Some(
        match schema.fields().get(column.index()).map(|f| f.data_type()) {
            Some(DataType::Date32) => Ok(ValueExpr::Year(column.index())),
            Some(other) => Err(format!("the year of a {other}")),
            None => Err(format!("column {} out of range", column.index())),
        },
    )
}

fn literal(value: &ScalarValue) -> Result<ValueExpr, String> {
    Ok(match value {
        ScalarValue::Int8(Some(v)) => ValueExpr::Int(i64::from(*v)),
        ScalarValue::Int16(Some(v)) => ValueExpr::Int(i64::from(*v)),
        ScalarValue::Int32(Some(v)) => ValueExpr::Int(i64::from(*v)),
        ScalarValue::Int64(Some(v)) => ValueExpr::Int(*v),
        ScalarValue::UInt8(Some(v)) => ValueExpr::Int(i64::from(*v)),
        ScalarValue::UInt16(Some(v)) => ValueExpr::Int(i64::from(*v)),
        ScalarValue::UInt32(Some(v)) => ValueExpr::Int(i64::from(*v)),
        ScalarValue::Decimal128(Some(v), _, _) => ValueExpr::Int(
            i64::try_from(*v).map_err(|_| "a decimal literal beyond 64 bits".to_string())?,
        ),
        ScalarValue::Float64(Some(v)) => ValueExpr::Float(*v),
        other if other.is_null() => return Err("a NULL literal in arithmetic".into()),
        other => return Err(format!("a {} literal", other.data_type())),
    })
}

fn binary(b: &BinaryExpr, out: DataType, schema: &Schema) -> Result<ValueExpr, String> {
    let op = match b.op() {
        Operator::Plus => Arith::Add,
        Operator::Minus => Arith::Sub,
        Operator::Multiply => Arith::Mul,
        Operator::Divide => return Err("division".into()),
        Operator::Modulo => return Err("modulo".into()),
        other => return Err(format!("operator {other}")),
    };
    let (l_dt, r_dt) = (data_type(b.left(), schema)?, data_type(b.right(), schema)?);
    let (left, right) = (translate(b.left(), schema)?, translate(b.right(), schema)?);
    match &out {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            // `fail_on_overflow` has no getter; an expression equal to the plain
            // (wrapping) one of the same parts does not have it set.
            let wrapping = BinaryExpr::new(Arc::clone(b.left()), *b.op(), Arc::clone(b.right()));
            if b != &wrapping {
                return Err("integer arithmetic that fails on overflow".into());
            }
            if l_dt != out || r_dt != out {
                return Err(format!("{l_dt} {} {r_dt} as {out}", op.symbol()));
            }
            let value = ValueExpr::arith(op, ArithMode::Wrapping, left, right);
            Ok(match integer(&out) {
                Some((bits, _)) if bits < 64 => ValueExpr::Wrap {
                    input: Box::new(value),
                    bits,
                },
                _ => value,
            })
        }
        DataType::Float64 if l_dt == out && r_dt == out => {
            Ok(ValueExpr::arith(op, ArithMode::Float, left, right))
        }
        DataType::Decimal128(_, s) => {
            let (DataType::Decimal128(_, ls), DataType::Decimal128(_, rs)) = (&l_dt, &r_dt) else {
                return Err(format!("{l_dt} {} {r_dt}", op.symbol()));
            };
            let (left, right) = match op {
                Arith::Mul if i16::from(*ls) + i16::from(*rs) == i16::from(*s) => (left, right),
                Arith::Mul => return Err(format!("a product rescaled to scale {s}")),
                _ => (rescaled(left, *ls, *s)?, rescaled(right, *rs, *s)?),
            };
            Ok(ValueExpr::arith(op, ArithMode::Checked, left, right))
        }
        other => Err(format!("arithmetic on {other}")),
    }
}

/// `value` (a decimal at `from` scale) at scale `to`.
fn rescaled(value: ValueExpr, from: i8, to: i8) -> Result<ValueExpr, String> {
    match to - from {
        0 => Ok(value),
        up @ 1..=18 => Ok(ValueExpr::Scale {
            input: Box::new(value),
            power: up as u8,
        }),
        _ => Err(format!("a decimal rescaled from scale {from} to {to}")),
    }
}

fn cast(
    inner: &Arc<dyn PhysicalExpr>,
    to: &DataType,
    schema: &Schema,
) -> Result<ValueExpr, String> {
    let from = data_type(inner, schema)?;
    let refuse = || Err(format!("CAST from {from} to {to}"));
    if &from == to {
        return translate(inner, schema);
    }
    match (integer(&from), to) {
        (Some((bits, signed)), _) if integer(to).is_some() => {
            let Some((to_bits, to_signed)) = integer(to) else {
                return refuse();
            };
            // Widening only: every value survives, the image does not change.
            let widens = if signed == to_signed {
                to_bits >= bits
            } else {
                !signed && to_signed && to_bits > bits
            };
            if widens {
                translate(inner, schema)
            } else {
                refuse()
            }
        }
        (Some((bits, signed)), DataType::Decimal128(p, s)) => {
            let room = i16::from(*p) - i16::from(*s) >= i16::from(integer_digits(bits, signed));
            if *s < 0 || !(room || fits_any_i64(*p)) {
                return refuse();
            }
            rescaled(translate(inner, schema)?, 0, *s)
        }
        (Some(_), DataType::Float64) => Ok(ValueExpr::ToFloat(Box::new(translate(inner, schema)?))),
        (None, _) => match (&from, to) {
            (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2))
                if s2 >= s1
                    && (i16::from(*p2) - i16::from(*s2) >= i16::from(*p1) - i16::from(*s1)
                        || fits_any_i64(*p2)) =>
            {
                rescaled(translate(inner, schema)?, *s1, *s2)
            }
            (DataType::Float32, DataType::Float64) => translate(inner, schema),
            _ => refuse(),
        },
        _ => refuse(),
    }
}

/// Whether every i64 value fits `precision` digits (10^19 > i64::MAX). A cast into such a
/// decimal is exact for every result the device can hold; a result beyond 64 bits is the
/// checked overflow, and DataFusion casts that batch (failing or not as it does).
fn fits_any_i64(precision: u8) -> bool {
    precision >= 19
}

fn negative(inner: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Result<ValueExpr, String> {
    let dt = data_type(inner, schema)?;
    let value = translate(inner, schema)?;
    match &dt {
        // A sign flip, as Arrow's negation: 0.0 - x would turn -0.0 into 0.0, and x * -1
        // keeps a NaN's sign.
        DataType::Float64 => Ok(ValueExpr::FloatNeg(Box::new(value))),
        DataType::Decimal128(_, _) => Ok(ValueExpr::arith(
            Arith::Sub,
            ArithMode::Checked,
            ValueExpr::Int(0),
            value,
        )),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let negated =
                ValueExpr::arith(Arith::Sub, ArithMode::Wrapping, ValueExpr::Int(0), value);
            Ok(match integer(&dt) {
                Some((bits, _)) if bits < 64 => ValueExpr::Wrap {
                    input: Box::new(negated),
                    bits,
                },
                _ => negated,
            })
        }
        other => Err(format!("negation of {other}")),
    }
}
