//! Filter predicates: trees of `column op literal` comparisons and NULL tests under
//! AND / OR / NOT, evaluated in SQL's three-valued logic.
//!
//! One representation serves every backend. The CPU evaluates a tree with Arrow's
//! comparison and Kleene-logic kernels on the columns as they are. A device evaluates the
//! same tree compiled to a small postfix program ([`DeviceProgram`]) over *8-byte images*
//! of the columns: every integer-like value (integers, dates, times, timestamps, Decimal128
//! up to precision 18 as its unscaled integer, booleans as 0/1) widened to `i64`, every
//! float widened to `f64`. The widening keeps order and equality, so comparing images
//! compares values, and the literal is converted the same way. Floats compare with
//! DataFusion's semantics on every backend: `-0.0 = 0.0`, NaN equals NaN and sorts above
//! `+inf` (the CPU canonicalises the zeros before Arrow's total-order kernels, a device
//! maps each image through `images::float_order_key`). Strings are compared on
//! the CPU only (no device string kernel yet), so a program with a string comparison is
//! refused with `Unsupported` and the placement rule keeps such a filter on the CPU.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Date64Array, Decimal128Array, DurationMicrosecondArray,
    DurationMillisecondArray, DurationNanosecondArray, DurationSecondArray, Float32Array,
    Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, LargeStringArray, StringArray,
    StringViewArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray,
    Time64NanosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray, UInt8Array, UInt16Array, UInt32Array,
};
use arrow::datatypes::{DataType, Schema, TimeUnit};
use oxidelake_core::EngineError;

/// A comparison between a column and a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `!=`
    NotEq,
}

impl CmpOp {
    /// The SQL operator text.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Lt => "<",
            CmpOp::LtEq => "<=",
            CmpOp::Gt => ">",
            CmpOp::GtEq => ">=",
            CmpOp::NotEq => "!=",
        }
    }

    /// The operator code the device kernels use (`OP_*` in `filter_project.cu`).
    pub fn code(self) -> i32 {
        match self {
            CmpOp::Eq => 0,
            CmpOp::Lt => 1,
            CmpOp::LtEq => 2,
            CmpOp::Gt => 3,
            CmpOp::GtEq => 4,
            CmpOp::NotEq => 5,
        }
    }

    /// `lit op col` is `col op.flipped() lit`.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            same => same,
        }
    }
}

/// A literal a column is compared with, in the column's value class: the 8-byte image
/// of an integer-like value, a float, or a string. [`check_predicates`] checks that it
/// fits the column's type (an Int8 column takes only -128..=127, a Decimal128(15, 2)
/// only unscaled values below 10^15).
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// An integer-like value as `i64` (dates in days, timestamps in the column's unit,
    /// decimals unscaled at the column's scale, booleans as 0 or 1).
    Int64(i64),
    /// A float (NaN allowed), compared as DataFusion compares floats: `-0.0` equals
    /// `+0.0`, otherwise IEEE total order (NaN above `+inf`; see `images::float_order_key`).
    Float64(f64),
    /// A string (compared on the CPU only).
    Utf8(String),
}

impl std::fmt::Display for Literal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Literal::Int64(v) => write!(f, "{v}"),
            Literal::Float64(v) => write!(f, "{v:?}"),
            Literal::Utf8(v) => write!(f, "'{}'", v.replace('\'', "''")),
        }
    }
}

/// `column <op> literal`.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnPredicate {
    /// Index of the column in the input batch.
    pub column: usize,
    /// The comparison.
    pub op: CmpOp,
    /// The right-hand side.
    pub literal: Literal,
}

/// A filter predicate. A row passes when the predicate is *true*; NULL (unknown) and
/// false drop it, as in SQL.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// `column op literal`; NULL when the column value is NULL.
    Compare(ColumnPredicate),
    /// `left op right` between two columns of the same type; NULL when either is NULL.
    CompareColumns {
        /// Index of the left column.
        left: usize,
        /// The comparison.
        op: CmpOp,
        /// Index of the right column.
        right: usize,
    },
    /// `column LIKE pattern` (or `NOT LIKE` when `negated`) on a string column, with
    /// `%` and `_` wildcards and `\` escapes; NULL when the value is NULL.
    Like {
        /// Index of the string column.
        column: usize,
        /// The pattern.
        pattern: String,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// `column IS NULL` (or `IS NOT NULL` when `negated`); never NULL itself.
    IsNull {
        /// Index of the column.
        column: usize,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// True when every child is true, false when any is false, NULL otherwise.
    And(Vec<Predicate>),
    /// True when any child is true, false when every child is false, NULL otherwise.
    Or(Vec<Predicate>),
    /// Negation; NOT NULL is NULL.
    Not(Box<Predicate>),
}

impl From<ColumnPredicate> for Predicate {
    fn from(p: ColumnPredicate) -> Self {
        Predicate::Compare(p)
    }
}

impl Predicate {
    /// Every column the predicate reads.
    pub fn columns(&self, out: &mut Vec<usize>) {
        match self {
            Predicate::Compare(p) => out.push(p.column),
            Predicate::CompareColumns { left, right, .. } => out.extend([*left, *right]),
            Predicate::Like { column, .. } => out.push(*column),
            Predicate::IsNull { column, .. } => out.push(*column),
            Predicate::And(c) | Predicate::Or(c) => c.iter().for_each(|p| p.columns(out)),
            Predicate::Not(p) => p.columns(out),
        }
    }

    /// The same predicate reading column `map(c)` wherever this one reads column `c`
    /// (for a batch holding only the columns a predicate reads).
    pub fn with_columns(&self, map: &dyn Fn(usize) -> usize) -> Predicate {
        match self {
            Predicate::Compare(p) => Predicate::Compare(ColumnPredicate {
                column: map(p.column),
                ..p.clone()
            }),
            Predicate::CompareColumns { left, op, right } => Predicate::CompareColumns {
                left: map(*left),
                op: *op,
                right: map(*right),
            },
            Predicate::Like {
                column,
                pattern,
                negated,
            } => Predicate::Like {
                column: map(*column),
                pattern: pattern.clone(),
                negated: *negated,
            },
            Predicate::IsNull { column, negated } => Predicate::IsNull {
                column: map(*column),
                negated: *negated,
            },
            Predicate::And(c) => Predicate::And(c.iter().map(|p| p.with_columns(map)).collect()),
            Predicate::Or(c) => Predicate::Or(c.iter().map(|p| p.with_columns(map)).collect()),
            Predicate::Not(p) => Predicate::Not(Box::new(p.with_columns(map))),
        }
    }

    /// The predicate as SQL-like text, naming columns `name@index` from `schema`.
    pub fn display(&self, schema: &Schema) -> String {
        let name = |i: usize| {
            schema
                .fields()
                .get(i)
                .map(|f| format!("{}@{i}", f.name()))
                .unwrap_or_else(|| format!("?@{i}"))
        };
        let join = |c: &[Predicate], sep: &str| {
            let parts: Vec<String> = c.iter().map(|p| p.display(schema)).collect();
            format!("({})", parts.join(sep))
        };
        match self {
            Predicate::Compare(p) => format!("{} {} {}", name(p.column), p.op.symbol(), p.literal),
            Predicate::CompareColumns { left, op, right } => {
                format!("{} {} {}", name(*left), op.symbol(), name(*right))
            }
            Predicate::Like {
                column,
                pattern,
                negated,
            } => {
                let not = if *negated { " NOT" } else { "" };
                let literal = Literal::Utf8(pattern.clone());
                format!("{}{not} LIKE {literal}", name(*column))
            }
            Predicate::IsNull { column, negated } => {
                let not = if *negated { " NOT" } else { "" };
                format!("{} IS{not} NULL", name(*column))
            }
            Predicate::And(c) => join(c, " AND "),
            Predicate::Or(c) => join(c, " OR "),
            Predicate::Not(p) => format!("NOT {}", p.display(schema)),
        }
    }
}

/// How a column's values compare: as 64-bit integers, as floats, or as strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueClass {
    /// Integer-like: integers (not UInt64), dates, times, timestamps, durations,
    /// Decimal128 up to precision 18, booleans.
    Int,
    /// Float32 and Float64.
    Float,
    /// Utf8, LargeUtf8, Utf8View, and dictionaries of them.
    Str,
}

/// The value class of `dt`, or `None` when predicates on it are not covered.
pub fn value_class(dt: &DataType) -> Option<ValueClass> {
    use DataType::*;
    match dt {
        Int8
        | Int16
        | Int32
        | Int64
        | UInt8
        | UInt16
        | UInt32
        | Date32
        | Date64
        | Boolean
        | Timestamp(_, _)
        | Duration(_) => Some(ValueClass::Int),
        Time32(TimeUnit::Second | TimeUnit::Millisecond)
        | Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond) => Some(ValueClass::Int),
        // Wider than 18 digits the 8-byte image saturates (`images::write_images`), which
        // keeps every comparison with a literal inside the i64 range exact, but not one
        // between two such columns (`wide_decimal`).
        Decimal128(_, _) => Some(ValueClass::Int),
        Float32 | Float64 => Some(ValueClass::Float),
        Utf8 | LargeUtf8 | Utf8View => Some(ValueClass::Str),
        Dictionary(_, v) if matches!(v.as_ref(), Utf8 | LargeUtf8 | Utf8View) => {
            Some(ValueClass::Str)
        }
        _ => None,
    }
}

/// A decimal whose values need more than 64 bits: its images saturate, so two of its
/// values can share an image and only comparisons with a literal stay exact.
pub fn wide_decimal(dt: &DataType) -> bool {
    matches!(dt, DataType::Decimal128(p, _) if *p > 18)
}

fn out_of_range(dt: &DataType, literal: &Literal) -> EngineError {
    EngineError::unsupported(
        "filter predicate",
        format!("literal {literal} does not fit a {dt} column"),
    )
}

/// A one-element array holding `literal` as a value of type `dt` (for a dictionary
/// column, of its value type): the right-hand side Arrow's comparison kernels take.
/// Fails with `Unsupported` when the literal's class or range does not fit `dt`.
pub fn literal_array(dt: &DataType, literal: &Literal) -> Result<ArrayRef, EngineError> {
    let bad = || out_of_range(dt, literal);
    let int = |v: &Literal| match v {
        Literal::Int64(v) => Ok(*v),
        _ => Err(bad()),
    };
    let array: ArrayRef = match dt {
        DataType::Int8 => Arc::new(Int8Array::from(vec![
            i8::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::Int16 => Arc::new(Int16Array::from(vec![
            i16::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::Int32 => Arc::new(Int32Array::from(vec![
            i32::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::Int64 => Arc::new(Int64Array::from(vec![int(literal)?])),
        DataType::UInt8 => Arc::new(UInt8Array::from(vec![
            u8::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::UInt16 => Arc::new(UInt16Array::from(vec![
            u16::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::UInt32 => Arc::new(UInt32Array::from(vec![
            u32::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::Date32 => Arc::new(Date32Array::from(vec![
            i32::try_from(int(literal)?).map_err(|_| bad())?,
        ])),
        DataType::Date64 => Arc::new(Date64Array::from(vec![int(literal)?])),
        DataType::Boolean => match int(literal)? {
            0 => Arc::new(BooleanArray::from(vec![false])),
            1 => Arc::new(BooleanArray::from(vec![true])),
            _ => return Err(bad()),
        },
        DataType::Timestamp(unit, tz) => {
            let v = vec![int(literal)?];
            match unit {
                TimeUnit::Second => {
                    Arc::new(TimestampSecondArray::from(v).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Millisecond => {
                    Arc::new(TimestampMillisecondArray::from(v).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Microsecond => {
                    Arc::new(TimestampMicrosecondArray::from(v).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Nanosecond => {
                    Arc::new(TimestampNanosecondArray::from(v).with_timezone_opt(tz.clone()))
                }
            }
        }
        DataType::Duration(unit) => {
            let v = vec![int(literal)?];
            match unit {
                TimeUnit::Second => Arc::new(DurationSecondArray::from(v)),
                TimeUnit::Millisecond => Arc::new(DurationMillisecondArray::from(v)),
                TimeUnit::Microsecond => Arc::new(DurationMicrosecondArray::from(v)),
                TimeUnit::Nanosecond => Arc::new(DurationNanosecondArray::from(v)),
            }
        }
        DataType::Time32(unit) => {
            let v = vec![i32::try_from(int(literal)?).map_err(|_| bad())?];
            match unit {
                TimeUnit::Second => Arc::new(Time32SecondArray::from(v)),
                TimeUnit::Millisecond => Arc::new(Time32MillisecondArray::from(v)),
                _ => return Err(bad()),
            }
        }
        DataType::Time64(unit) => {
            let v = vec![int(literal)?];
            match unit {
                TimeUnit::Microsecond => Arc::new(Time64MicrosecondArray::from(v)),
                TimeUnit::Nanosecond => Arc::new(Time64NanosecondArray::from(v)),
                _ => return Err(bad()),
            }
        }
        DataType::Decimal128(p, s) => {
            let v = int(literal)?;
            if u128::from(v.unsigned_abs()) >= 10u128.pow(u32::from(*p)) {
                return Err(bad());
            }
            // A wide column's image saturates at the i64 bounds: a literal on a bound
            // could then equal a value that is not it.
            if *p > 18 && (v == i64::MIN || v == i64::MAX) {
                return Err(bad());
            }
            Arc::new(
                Decimal128Array::from(vec![i128::from(v)])
                    .with_precision_and_scale(*p, *s)
                    .map_err(|_| bad())?,
            )
        }
        DataType::Float32 => match literal {
            Literal::Float64(v) if v.is_nan() || f64::from(*v as f32) == *v => {
                Arc::new(Float32Array::from(vec![*v as f32]))
            }
            _ => return Err(bad()),
        },
        DataType::Float64 => match literal {
            Literal::Float64(v) => Arc::new(Float64Array::from(vec![*v])),
            _ => return Err(bad()),
        },
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let Literal::Utf8(s) = literal else {
                return Err(bad());
            };
            match dt {
                DataType::Utf8 => Arc::new(StringArray::from(vec![s.as_str()])),
                DataType::LargeUtf8 => Arc::new(LargeStringArray::from(vec![s.as_str()])),
                _ => Arc::new(StringViewArray::from(vec![s.as_str()])),
            }
        }
        DataType::Dictionary(_, value) if value_class(dt) == Some(ValueClass::Str) => {
            return literal_array(value, literal);
        }
        other => {
            return Err(EngineError::unsupported(
                "filter predicate",
                format!("predicates on {other} are not covered"),
            ));
        }
    };
    Ok(array)
}

/// Checks that every leaf of `predicates` names a column of `schema` whose type is
/// covered and compares it with a literal that fits that type (no implicit casts).
pub fn check_predicates(schema: &Schema, predicates: &[Predicate]) -> Result<(), EngineError> {
    predicates.iter().try_for_each(|p| check_one(schema, p))
}

fn check_one(schema: &Schema, predicate: &Predicate) -> Result<(), EngineError> {
    let field = |column: usize| {
        schema
            .fields()
            .get(column)
            .ok_or_else(|| EngineError::InvalidArgument {
                what: "predicate column",
                detail: format!("index {column} out of {} columns", schema.fields().len()),
            })
    };
    match predicate {
        Predicate::Compare(p) => {
            let f = field(p.column)?;
            literal_array(f.data_type(), &p.literal).map(|_| ())
        }
        Predicate::CompareColumns { left, right, .. } => {
            let (l, r) = (field(*left)?, field(*right)?);
            // Two decimals wider than 18 digits are compared too: the CPU compares the
            // arrays themselves, and a device checks per batch that no value it compares
            // lost bits to its image (`DeviceProgram::check_column_pairs`).
            if l.data_type() != r.data_type() || value_class(l.data_type()).is_none() {
                return Err(EngineError::unsupported(
                    "filter predicate",
                    format!(
                        "{} ({}) compared with {} ({}): only columns of one covered type",
                        l.name(),
                        l.data_type(),
                        r.name(),
                        r.data_type()
                    ),
                ));
            }
            Ok(())
        }
        Predicate::Like { column, .. } => {
            let f = field(*column)?;
            if value_class(f.data_type()) != Some(ValueClass::Str) {
                return Err(EngineError::unsupported(
                    "filter predicate",
                    format!("LIKE on {} ({})", f.name(), f.data_type()),
                ));
            }
            Ok(())
        }
        Predicate::IsNull { column, .. } => field(*column).map(|_| ()),
        Predicate::And(c) | Predicate::Or(c) => c.iter().try_for_each(|p| check_one(schema, p)),
        Predicate::Not(p) => check_one(schema, p),
    }
}

mod images;
mod program;

pub use images::{canonical_float_zeros, string_column, write_images};
pub use program::{DeviceProgram, MAX_PROGRAM_STACK, like_percent, opcode, run_program_on_host};

#[cfg(test)]
mod tests;
