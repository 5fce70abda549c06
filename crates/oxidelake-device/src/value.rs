//! Computed columns: arithmetic over the 8-byte images of numeric columns.
//!
//! A [`ValueExpr`] is `+`, `-` and `*` over columns and literals, with the casts a SQL
//! planner puts between them (decimal rescales, integer widening, integer to float).
//! Every value is the column's 8-byte image ([`write_images`]): integers and decimals as
//! their (unscaled) `i64` (a decimal whose value needs more than 64 bits fails the batch,
//! [`load_images`]), floats as `f64` bits. Each arithmetic node says how it treats
//! overflow, so one tree reproduces the SQL engine's rules:
//!
//! - [`ArithMode::Wrapping`]: integer arithmetic wraps, as DataFusion's does. Computing
//!   in 64 bits and then keeping the low bits ([`ValueExpr::Wrap`]) gives exactly the
//!   narrower type's wrapping result, because wrapping `+ - *` commute with truncation.
//! - [`ArithMode::Checked`]: decimal arithmetic is exact. DataFusion computes decimals in
//!   128 bits; the device computes them in 64 and reports an overflow instead of a wrong
//!   value, and the operator then evaluates that batch with DataFusion's own expression.
//!   (TPC-H's largest computed money values use about 40 of the 64 bits.)
//! - [`ArithMode::Float`]: IEEE `f64` arithmetic, each operation rounded on its own (the
//!   device never fuses a multiply and an add, which would round once and differ).
//!
//! A NULL operand makes the result NULL. Division and everything else (CASE, functions)
//! stay with DataFusion: its decimal division rounds in ways a 64-bit image cannot
//! reproduce cheaply, and the translation refuses them with a reason.
//!
//! [`write_images`]: crate::ops::write_images

use arrow::array::{Array, AsArray, Int64Array};
use arrow::datatypes::{DataType, Decimal128Type, Int64Type, Schema};
use oxidelake_core::EngineError;

use crate::predicate::{ValueClass, value_class, write_images};

mod eval;
mod program;

pub use eval::{evaluate_on_host, output_array};
pub use program::{MAX_VALUE_STACK, ValueProgram, run_value_program_on_host, value_opcode};

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arith {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
}

impl Arith {
    /// The SQL operator text.
    pub fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
        }
    }
}

/// How an arithmetic node treats its 64-bit images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithMode {
    /// Two's-complement wrapping on `i64` images (integer SQL types).
    Wrapping,
    /// Exact on `i64` images; an overflow (of a non-NULL row) fails the batch.
    Checked,
    /// IEEE `f64` on float images.
    Float,
}

/// An arithmetic expression over the columns of a batch (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum ValueExpr {
    /// The image of an input column: an integer type other than UInt64, a decimal (its
    /// values fitting 64 bits, checked per batch), Float32 or Float64.
    Column(usize),
    /// An integer image (an integer, or a decimal's unscaled value).
    Int(i64),
    /// A float.
    Float(f64),
    /// `left op right`.
    Arith {
        /// The operator.
        op: Arith,
        /// How overflow is treated.
        mode: ArithMode,
        /// Left operand.
        left: Box<ValueExpr>,
        /// Right operand.
        right: Box<ValueExpr>,
    },
    /// `input * 10^power`, checked: a decimal rescaled to a larger scale, or an integer
    /// cast to a decimal.
    Scale {
        /// The integer image.
        input: Box<ValueExpr>,
        /// The power of ten, 1 to 18.
        power: u8,
    },
    /// An integer image converted to `f64` (round to nearest, as Rust's `as` does).
    ToFloat(Box<ValueExpr>),
    /// A float with its sign bit flipped: SQL's `-x` on a float, NaN included (a
    /// multiplication by -1 would keep a NaN's sign on most hardware).
    FloatNeg(Box<ValueExpr>),
    /// The low `bits` (8, 16 or 32) of an integer image, sign-extended: the result of a
    /// wrapping operation in a narrower integer type.
    Wrap {
        /// The integer image.
        input: Box<ValueExpr>,
        /// The narrower type's width.
        bits: u8,
    },
    /// The proleptic Gregorian year of a Date32 column's day number (`EXTRACT(YEAR
    /// FROM d)`); NULL outside the dates Arrow's calendar covers ([`YEAR_DAYS`]), as
    /// Arrow's `date_part` gives.
    Year(usize),
}

/// The day numbers (days since 1970-01-01) whose year Arrow's `date_part` computes:
/// -262143-01-01 to 262142-12-31, chrono's calendar range.
pub const YEAR_DAYS: std::ops::RangeInclusive<i64> = -96_465_292..=95_026_236;

/// The proleptic Gregorian year of day `days` since 1970-01-01 (H. Hinnant's
/// `civil_from_days`; the kernel's `year_of_days` is the same function).
pub fn year_of_days(days: i64) -> i64 {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    yoe + era * 400 + i64::from(month <= 2)
}

impl ValueExpr {
    /// `left op right` in `mode`.
    pub fn arith(op: Arith, mode: ArithMode, left: ValueExpr, right: ValueExpr) -> Self {
        ValueExpr::Arith {
            op,
            mode,
            left: Box::new(left),
            right: Box::new(right),
        }
    }

    /// Every column the expression reads, in first-use order, without repeats.
    pub fn columns(&self, out: &mut Vec<usize>) {
        match self {
            ValueExpr::Column(c) => {
                if !out.contains(c) {
                    out.push(*c)
                }
            }
            ValueExpr::Int(_) | ValueExpr::Float(_) => {}
            ValueExpr::Arith { left, right, .. } => {
                left.columns(out);
                right.columns(out);
            }
            ValueExpr::Scale { input, .. }
            | ValueExpr::ToFloat(input)
            | ValueExpr::FloatNeg(input)
            | ValueExpr::Wrap { input, .. } => input.columns(out),
            ValueExpr::Year(c) => ValueExpr::Column(*c).columns(out),
        }
    }

    /// The same expression reading column `map(c)` wherever this one reads column `c`.
    pub fn with_columns(&self, map: &dyn Fn(usize) -> usize) -> ValueExpr {
        let inner = |e: &ValueExpr| Box::new(e.with_columns(map));
        match self {
            ValueExpr::Column(c) => ValueExpr::Column(map(*c)),
            ValueExpr::Int(_) | ValueExpr::Float(_) => self.clone(),
            ValueExpr::Arith {
                op,
                mode,
                left,
                right,
            } => ValueExpr::Arith {
                op: *op,
                mode: *mode,
                left: inner(left),
                right: inner(right),
            },
            ValueExpr::Scale { input, power } => ValueExpr::Scale {
                input: inner(input),
                power: *power,
            },
            ValueExpr::ToFloat(input) => ValueExpr::ToFloat(inner(input)),
            ValueExpr::FloatNeg(input) => ValueExpr::FloatNeg(inner(input)),
            ValueExpr::Wrap { input, bits } => ValueExpr::Wrap {
                input: inner(input),
                bits: *bits,
            },
            ValueExpr::Year(c) => ValueExpr::Year(map(*c)),
        }
    }

    /// Whether the expression's images are floats.
    pub fn is_float(&self, schema: &Schema) -> bool {
        match self {
            ValueExpr::Column(c) => schema
                .fields()
                .get(*c)
                .is_some_and(|f| value_class(f.data_type()) == Some(ValueClass::Float)),
            ValueExpr::Int(_) => false,
            ValueExpr::Float(_) | ValueExpr::ToFloat(_) | ValueExpr::FloatNeg(_) => true,
            ValueExpr::Arith { mode, .. } => *mode == ArithMode::Float,
            ValueExpr::Scale { .. } | ValueExpr::Wrap { .. } | ValueExpr::Year(_) => false,
        }
    }
}

/// A computed output column: the expression and the Arrow type of its values.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueColumn {
    /// What to compute.
    pub expr: ValueExpr,
    /// The output type: Int8 to Int64, Float64, or Decimal128 (any precision; the value
    /// is computed exactly in 64 bits or the batch fails with an overflow).
    pub data_type: DataType,
}

/// Whether `dt` is a type a computed column may have.
pub fn is_value_output(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float64
            | DataType::Decimal128(_, _)
    )
}

/// Whether a column of type `dt` can be read as an operand image: integers other than
/// UInt64, decimals, Float32 and Float64. A decimal wider than 18 digits (a product
/// computed below, typically) is read when every value of the batch fits 64 bits, and
/// fails the batch with the overflow error otherwise ([`load_images`]).
pub fn is_value_input(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(_, _)
    )
}

/// The images of `column`'s rows, for an operand: [`write_images`] for every type but
/// decimals, which are narrowed here in one branch-free pass with the check that no
/// valid value lost bits (the overflow error if one did: a decimal wider than 18 digits
/// holding a value beyond 64 bits, or an array holding values beyond its precision).
///
/// [`write_images`]: crate::ops::write_images
pub fn load_images(column: &dyn Array) -> Result<Vec<i64>, EngineError> {
    let rows = column.len();
    if !matches!(column.data_type(), DataType::Decimal128(_, _)) {
        let mut out = vec![0i64; rows];
        write_images(column, 0..rows, &mut out)?;
        return Ok(out);
    }
    let values = column.as_primitive::<Decimal128Type>();
    let mut lost = false;
    let out: Vec<i64> = values
        .values()
        .iter()
        .map(|v| {
            let image = *v as i64;
            lost |= i128::from(image) != *v;
            image
        })
        .collect();
    if lost
        && values
            .values()
            .iter()
            .zip(&out)
            .enumerate()
            .any(|(row, (v, image))| i128::from(*image) != *v && values.is_valid(row))
    {
        return Err(overflow_error());
    }
    Ok(out)
}

/// Whether every value of `dt` maps to its own Int64 value (`v as i64` is one-to-one: a
/// widening, a reinterpretation of the same 64 bits, or a decimal of at most 18 digits),
/// so equal Int64 values are equal keys: the join keys taken as one column's images.
pub fn widens_exactly(dt: &DataType) -> bool {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _) => true,
        DataType::Decimal128(precision, _) => *precision <= 18,
        _ => false,
    }
}

/// `column` (a type of [`widens_exactly`]) as its Int64 images, NULLs kept; an Int64
/// column is its own, without a copy. A decimal holding a valid value past its 18
/// digits (an invalid array) is the overflow error: a saturated key would not be
/// one-to-one.
pub fn widened_to_int64(column: &dyn Array) -> Result<Int64Array, EngineError> {
    if let Some(ints) = column.as_primitive_opt::<Int64Type>() {
        return Ok(ints.clone());
    }
    Ok(Int64Array::new(
        load_images(column)?.into(),
        column.logical_nulls(),
    ))
}

fn unsupported(detail: impl Into<String>) -> EngineError {
    EngineError::unsupported("computed column", detail)
}

/// Checks that `column` reads existing operand columns, that its image classes agree
/// (float nodes over float images, integer nodes over integer images) and that its
/// output type is covered.
pub fn check_value_column(schema: &Schema, column: &ValueColumn) -> Result<(), EngineError> {
    if !is_value_output(&column.data_type) {
        return Err(unsupported(format!("output type {}", column.data_type)));
    }
    check_expr(schema, &column.expr)?;
    if column.expr.is_float(schema) != (column.data_type == DataType::Float64) {
        return Err(unsupported(format!(
            "a {} column from {} images",
            column.data_type,
            if column.expr.is_float(schema) {
                "float"
            } else {
                "integer"
            }
        )));
    }
    Ok(())
}

fn check_expr(schema: &Schema, expr: &ValueExpr) -> Result<(), EngineError> {
    match expr {
        ValueExpr::Column(c) => {
            let field = schema
                .fields()
                .get(*c)
                .ok_or_else(|| EngineError::InvalidArgument {
                    what: "computed column input",
                    detail: format!("index {c} out of {} columns", schema.fields().len()),
                })?;
            if !is_value_input(field.data_type()) {
                return Err(unsupported(format!(
                    "arithmetic on {} ({})",
                    field.name(),
                    field.data_type()
                )));
            }
            Ok(())
        }
        ValueExpr::Int(_) | ValueExpr::Float(_) => Ok(()),
        ValueExpr::Arith {
            mode, left, right, ..
        } => {
            check_expr(schema, left)?;
            check_expr(schema, right)?;
            let float = *mode == ArithMode::Float;
            if left.is_float(schema) != float || right.is_float(schema) != float {
                return Err(unsupported("an operation mixing float and integer images"));
            }
            Ok(())
        }
        ValueExpr::Scale { input, power } => {
            check_expr(schema, input)?;
            if !(1..=18).contains(power) || input.is_float(schema) {
                return Err(unsupported(format!("a rescale by 10^{power}")));
            }
            Ok(())
        }
        ValueExpr::ToFloat(input) => {
            check_expr(schema, input)?;
            if input.is_float(schema) {
                return Err(unsupported("a float converted to a float"));
            }
            Ok(())
        }
        ValueExpr::FloatNeg(input) => {
            check_expr(schema, input)?;
            if !input.is_float(schema) {
                return Err(unsupported("a float negation of an integer"));
            }
            Ok(())
        }
        ValueExpr::Wrap { input, bits } => {
            check_expr(schema, input)?;
            if !matches!(bits, 8 | 16 | 32) || input.is_float(schema) {
                return Err(unsupported(format!("wrapping to {bits} bits")));
            }
            Ok(())
        }
        ValueExpr::Year(c) => match schema.fields().get(*c).map(|f| f.data_type()) {
            Some(DataType::Date32) => Ok(()),
            Some(other) => Err(unsupported(format!("the year of a {other}"))),
            None => Err(EngineError::InvalidArgument {
                what: "computed column input",
                detail: format!("index {c} out of {} columns", schema.fields().len()),
            }),
        },
    }
}

const OVERFLOW: &str = "a decimal value in this batch needs more than 64 bits";

/// The overflow every computing path reports, so the operator knows to run the batch
/// with the SQL engine's own (128-bit) arithmetic.
pub fn overflow_error() -> EngineError {
    unsupported(OVERFLOW)
}

/// Whether `err` is [`overflow_error`].
pub fn is_overflow(err: &EngineError) -> bool {
    matches!(err, EngineError::Unsupported { detail, .. } if detail == OVERFLOW)
}

#[cfg(test)]
mod tests;
