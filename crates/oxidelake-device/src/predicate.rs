//! Filter predicates: trees of `column op literal` comparisons and NULL tests under
//! AND / OR / NOT, evaluated in SQL's three-valued logic.
//!
//! One representation serves every backend. The CPU evaluates a tree with Arrow's
//! comparison and Kleene-logic kernels on the columns as they are. A device evaluates the
//! same tree compiled to a small postfix program ([`DeviceProgram`]) over *8-byte images*
//! of the columns: every integer-like value (integers, dates, times, timestamps, Decimal128
//! up to precision 18 as its unscaled integer, booleans as 0/1) widened to `i64`, every
//! float widened to `f64`. The widening keeps order and equality, so comparing images
//! compares values, and the literal is converted the same way. Strings are compared on
//! the CPU only (no device string kernel yet), so a program with a string comparison is
//! refused with `Unsupported` and the placement rule keeps such a filter on the CPU.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Date64Array, Decimal128Array,
    DurationMicrosecondArray, DurationMillisecondArray, DurationNanosecondArray,
    DurationSecondArray, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array,
    LargeStringArray, StringArray, StringViewArray, Time32MillisecondArray, Time32SecondArray,
    Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
    TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray, UInt8Array,
    UInt16Array, UInt32Array,
};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, DurationMicrosecondType,
    DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float32Type, Float64Type,
    Int8Type, Int16Type, Int32Type, Int64Type, Schema, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type,
    UInt32Type,
};
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
    /// A float (NaN allowed; compared in IEEE total order, like Arrow).
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
        Decimal128(p, _) if *p <= 18 => Some(ValueClass::Int),
        Float32 | Float64 => Some(ValueClass::Float),
        Utf8 | LargeUtf8 | Utf8View => Some(ValueClass::Str),
        Dictionary(_, v) if matches!(v.as_ref(), Utf8 | LargeUtf8 | Utf8View) => {
            Some(ValueClass::Str)
        }
        _ => None,
    }
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
        DataType::Decimal128(p, s) if *p <= 18 => {
            let v = int(literal)?;
            if v.unsigned_abs() >= 10u64.pow(u32::from(*p)) {
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

/// Writes the 8-byte images of `column[range]` into `out` (`out.len() >= range.len()`):
/// integer-like values widened to `i64`, floats widened to `f64` and stored as their
/// bit pattern. A NULL slot gets whatever its buffer holds; readers check validity.
pub fn write_images(
    column: &dyn Array,
    range: Range<usize>,
    out: &mut [i64],
) -> Result<(), EngineError> {
    let n = range.len();
    if out.len() < n || range.end > column.len() {
        return Err(EngineError::InvalidArgument {
            what: "image range",
            detail: format!(
                "rows {range:?} of {} into {} slots",
                column.len(),
                out.len()
            ),
        });
    }
    let out = &mut out[..n];
    macro_rules! widen {
        ($t:ty) => {{
            let values = &column.as_primitive::<$t>().values()[range];
            out.iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = i64::from(*v));
        }};
    }
    match column.data_type() {
        DataType::Int8 => widen!(Int8Type),
        DataType::Int16 => widen!(Int16Type),
        DataType::Int32 => widen!(Int32Type),
        DataType::Int64 => widen!(Int64Type),
        DataType::UInt8 => widen!(UInt8Type),
        DataType::UInt16 => widen!(UInt16Type),
        DataType::UInt32 => widen!(UInt32Type),
        DataType::Date32 => widen!(Date32Type),
        DataType::Date64 => widen!(Date64Type),
        DataType::Time32(TimeUnit::Second) => widen!(Time32SecondType),
        DataType::Time32(TimeUnit::Millisecond) => widen!(Time32MillisecondType),
        DataType::Time64(TimeUnit::Microsecond) => widen!(Time64MicrosecondType),
        DataType::Time64(TimeUnit::Nanosecond) => widen!(Time64NanosecondType),
        DataType::Timestamp(TimeUnit::Second, _) => widen!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => widen!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => widen!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => widen!(TimestampNanosecondType),
        DataType::Duration(TimeUnit::Second) => widen!(DurationSecondType),
        DataType::Duration(TimeUnit::Millisecond) => widen!(DurationMillisecondType),
        DataType::Duration(TimeUnit::Microsecond) => widen!(DurationMicrosecondType),
        DataType::Duration(TimeUnit::Nanosecond) => widen!(DurationNanosecondType),
        DataType::Decimal128(p, _) if *p <= 18 => {
            let values = &column.as_primitive::<Decimal128Type>().values()[range];
            // Precision <= 18 keeps every valid value below 10^18 < 2^63; an invalid
            // value saturates instead of wrapping (it cannot equal a checked literal).
            out.iter_mut().zip(values).for_each(|(o, v)| {
                *o = i64::try_from(*v).unwrap_or(if *v < 0 { i64::MIN } else { i64::MAX })
            });
        }
        DataType::Boolean => {
            let values = column.as_boolean();
            out.iter_mut()
                .zip(range)
                .for_each(|(o, i)| *o = i64::from(values.value(i)));
        }
        DataType::Float32 => {
            let values = &column.as_primitive::<Float32Type>().values()[range];
            out.iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = f64::from(*v).to_bits() as i64);
        }
        DataType::Float64 => {
            let values = &column.as_primitive::<Float64Type>().values()[range];
            out.iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = v.to_bits() as i64);
        }
        other => {
            return Err(EngineError::unsupported(
                "device predicate column",
                format!("{other} has no 8-byte image"),
            ));
        }
    }
    Ok(())
}

/// Opcodes of a [`DeviceProgram`] (`I_*` in `filter_project.cu`).
pub mod opcode {
    /// Push `slot op literal` (NULL when the slot's value is NULL).
    pub const CMP: i32 = 0;
    /// Push `slot IS NULL` (`IS NOT NULL` when the argument is 1).
    pub const IS_NULL: i32 = 1;
    /// Pop two, push their Kleene AND.
    pub const AND: i32 = 2;
    /// Pop two, push their Kleene OR.
    pub const OR: i32 = 3;
    /// Pop one, push its negation (NULL stays NULL).
    pub const NOT: i32 = 4;
    /// Push `slot op other_slot` (the literal field holds the other slot; NULL when
    /// either value is NULL).
    pub const CMP_SLOTS: i32 = 5;
    /// Push `string slot op pool string` (the literal field holds the pool index),
    /// comparing bytes lexicographically as Arrow does.
    pub const CMP_STR: i32 = 6;
    /// Push `string slot LIKE pool pattern` (`NOT LIKE` when the argument is 1); the
    /// pattern holds `%` wildcards only.
    pub const LIKE: i32 = 7;
}

/// The deepest value stack a device program may use (`MAX_STACK` in the kernel).
pub const MAX_PROGRAM_STACK: usize = 32;

/// A predicate conjunction compiled to postfix form for a device kernel: one thread per
/// row runs the instructions over a small stack of three-valued results.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceProgram {
    /// The input columns the program reads, one slot each, and how the slot holds them:
    /// integer or float 8-byte images, or strings (offsets and bytes).
    pub slots: Vec<(usize, ValueClass)>,
    /// Per instruction: the opcode ([`opcode`]).
    pub codes: Vec<i32>,
    /// Per instruction: the slot it reads (0 when it reads none).
    pub slot_of: Vec<i32>,
    /// Per instruction: the comparison code ([`CmpOp::code`]) or the IS NULL negation.
    pub args: Vec<i32>,
    /// Per instruction: the literal's 8-byte image (0 when it has none).
    pub literals: Vec<i64>,
    /// The deepest stack the program reaches.
    pub max_depth: usize,
    /// The string literals and LIKE patterns, back to back.
    pub strings: Vec<u8>,
    /// Where each pool string starts in `strings`, plus its end: string `i` is
    /// `strings[string_offsets[i]..string_offsets[i + 1]]`.
    pub string_offsets: Vec<i32>,
}

impl Default for DeviceProgram {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            codes: Vec::new(),
            slot_of: Vec::new(),
            args: Vec::new(),
            literals: Vec::new(),
            max_depth: 0,
            strings: Vec::new(),
            string_offsets: vec![0],
        }
    }
}

impl DeviceProgram {
    /// Compiles the conjunction `predicates` against `schema`. Fails with `Unsupported`
    /// for string comparisons, types without an 8-byte image and programs deeper than
    /// [`MAX_PROGRAM_STACK`].
    pub fn compile(schema: &Schema, predicates: &[Predicate]) -> Result<Self, EngineError> {
        check_predicates(schema, predicates)?;
        let mut program = DeviceProgram::default();
        let mut depth = 0usize;
        emit_all(&mut program, schema, predicates, opcode::AND, &mut depth)?;
        if program.max_depth > MAX_PROGRAM_STACK {
            return Err(EngineError::unsupported(
                "device predicate",
                format!(
                    "needs a stack of {} values; the kernel has {MAX_PROGRAM_STACK}",
                    program.max_depth
                ),
            ));
        }
        Ok(program)
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether the program has no instructions (every row passes).
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    fn slot(&mut self, schema: &Schema, column: usize) -> Result<i32, EngineError> {
        let dt = schema.field(column).data_type();
        let class = value_class(dt).ok_or_else(|| {
            EngineError::unsupported(
                "device predicate",
                format!("column {} is {dt}", schema.field(column).name()),
            )
        })?;
        let at = match self.slots.iter().position(|(c, _)| *c == column) {
            Some(at) => at,
            None => {
                self.slots.push((column, class));
                self.slots.len() - 1
            }
        };
        i32::try_from(at)
            .map_err(|_| EngineError::unsupported("device predicate", "too many columns"))
    }

    /// Adds `text` to the string pool; returns its index.
    fn pool(&mut self, text: &str) -> Result<i64, EngineError> {
        self.strings.extend_from_slice(text.as_bytes());
        let end = i32::try_from(self.strings.len()).map_err(|_| {
            EngineError::unsupported("device predicate", "string literals over 2 GiB")
        })?;
        self.string_offsets.push(end);
        Ok(self.string_offsets.len() as i64 - 2)
    }

    fn class(&self, slot: i32) -> ValueClass {
        self.slots
            .get(slot as usize)
            .map_or(ValueClass::Int, |(_, class)| *class)
    }

    fn push(&mut self, code: i32, slot: i32, arg: i32, literal: i64, depth: &mut usize) {
        self.codes.push(code);
        self.slot_of.push(slot);
        self.args.push(arg);
        self.literals.push(literal);
        match code {
            opcode::CMP | opcode::IS_NULL | opcode::CMP_SLOTS | opcode::CMP_STR | opcode::LIKE => {
                *depth += 1
            }
            opcode::AND | opcode::OR => *depth -= 1,
            _ => {}
        }
        self.max_depth = self.max_depth.max(*depth);
    }
}

/// Emits `children` combined with `join` (AND or OR); an empty AND is true, an empty
/// OR false (both written as a comparison-free constant: `x IS NULL OR x IS NOT NULL`
/// would need a column, so they are rejected instead; the planner never emits them).
fn emit_all(
    program: &mut DeviceProgram,
    schema: &Schema,
    children: &[Predicate],
    join: i32,
    depth: &mut usize,
) -> Result<(), EngineError> {
    for (i, child) in children.iter().enumerate() {
        emit(program, schema, child, depth)?;
        if i > 0 {
            program.push(join, 0, 0, 0, depth);
        }
    }
    if children.is_empty() && join == opcode::OR {
        return Err(EngineError::unsupported("device predicate", "an empty OR"));
    }
    Ok(())
}

fn emit(
    program: &mut DeviceProgram,
    schema: &Schema,
    predicate: &Predicate,
    depth: &mut usize,
) -> Result<(), EngineError> {
    match predicate {
        Predicate::Compare(p) => {
            let slot = program.slot(schema, p.column)?;
            let (code, image) = match &p.literal {
                Literal::Int64(v) => (opcode::CMP, *v),
                Literal::Float64(v) => (opcode::CMP, v.to_bits() as i64),
                Literal::Utf8(v) => (opcode::CMP_STR, program.pool(v)?),
            };
            program.push(code, slot, p.op.code(), image, depth);
        }
        Predicate::CompareColumns { left, op, right } => {
            let (l, r) = (program.slot(schema, *left)?, program.slot(schema, *right)?);
            if program.class(l) == ValueClass::Str {
                return Err(EngineError::unsupported(
                    "device predicate",
                    "comparing two string columns runs on the CPU",
                ));
            }
            program.push(opcode::CMP_SLOTS, l, op.code(), i64::from(r), depth);
        }
        Predicate::Like {
            column,
            pattern,
            negated,
        } => {
            if pattern.contains(['_', '\\']) {
                return Err(EngineError::unsupported(
                    "device predicate",
                    "LIKE with _ or escapes runs on the CPU (the device matches % only)",
                ));
            }
            let slot = program.slot(schema, *column)?;
            let at = program.pool(pattern)?;
            program.push(opcode::LIKE, slot, i32::from(*negated), at, depth);
        }
        Predicate::IsNull { column, negated } => {
            let slot = program.slot(schema, *column)?;
            program.push(opcode::IS_NULL, slot, i32::from(*negated), 0, depth);
        }
        Predicate::And(c) => {
            if c.is_empty() {
                return Err(EngineError::unsupported("device predicate", "an empty AND"));
            }
            emit_all(program, schema, c, opcode::AND, depth)?;
        }
        Predicate::Or(c) => emit_all(program, schema, c, opcode::OR, depth)?,
        Predicate::Not(p) => {
            emit(program, schema, p, depth)?;
            program.push(opcode::NOT, 0, 0, 0, depth);
        }
    }
    Ok(())
}

/// Evaluates a compiled program on the host, row by row, exactly as the kernel does:
/// the reference that checks compilation kept the tree's meaning (unit tests compare it
/// with the CPU kernels).
pub fn run_program_on_host(
    program: &DeviceProgram,
    batch: &arrow::record_batch::RecordBatch,
) -> Result<Vec<bool>, EngineError> {
    const NULL: u8 = 2;
    let rows = batch.num_rows();
    let mut images = Vec::with_capacity(program.slots.len());
    let mut strings = Vec::with_capacity(program.slots.len());
    let mut valid: Vec<Vec<bool>> = Vec::with_capacity(program.slots.len());
    for (column, class) in &program.slots {
        let array = batch.column(*column);
        let mut out = vec![0i64; rows];
        if *class == ValueClass::Str {
            strings.push(Some(string_column(array.as_ref())?));
        } else {
            write_images(array.as_ref(), 0..rows, &mut out)?;
            strings.push(None);
        }
        images.push(out);
        valid.push((0..rows).map(|i| array.is_valid(i)).collect());
    }
    let pool = |i: i64| {
        let i = i as usize;
        let (a, b) = (
            program.string_offsets[i] as usize,
            program.string_offsets[i + 1] as usize,
        );
        &program.strings[a..b]
    };
    let mut out = Vec::with_capacity(rows);
    for row in 0..rows {
        let mut stack: Vec<u8> = Vec::with_capacity(program.max_depth);
        for i in 0..program.len() {
            let slot = program.slot_of[i] as usize;
            let code = program.codes[i];
            match code {
                opcode::CMP | opcode::CMP_SLOTS => {
                    let other = (code == opcode::CMP_SLOTS).then_some(program.literals[i] as usize);
                    if !valid[slot][row] || other.is_some_and(|o| !valid[o][row]) {
                        stack.push(NULL);
                        continue;
                    }
                    let r = other.map_or(program.literals[i], |o| images[o][row]);
                    let (mut l, mut r) = (images[slot][row], r);
                    if program.slots[slot].1 == ValueClass::Float {
                        l = total_order_key(l);
                        r = total_order_key(r);
                    }
                    stack.push(u8::from(holds(l.cmp(&r), program.args[i])));
                }
                opcode::CMP_STR | opcode::LIKE => {
                    let Some(Some(values)) = strings.get(slot) else {
                        stack.push(NULL);
                        continue;
                    };
                    if !valid[slot][row] {
                        stack.push(NULL);
                        continue;
                    }
                    let value = values.value(row).as_bytes();
                    let literal = pool(program.literals[i]);
                    let t = if code == opcode::CMP_STR {
                        holds(value.cmp(literal), program.args[i])
                    } else {
                        like_percent(value, literal) != (program.args[i] != 0)
                    };
                    stack.push(u8::from(t));
                }
                opcode::IS_NULL => {
                    let null = !valid[slot][row];
                    stack.push(u8::from(null != (program.args[i] != 0)));
                }
                opcode::NOT => {
                    if let Some(v) = stack.last_mut() {
                        *v = if *v == NULL { NULL } else { 1 - *v };
                    }
                }
                code => {
                    let b = stack.pop().unwrap_or(NULL);
                    let a = stack.pop().unwrap_or(NULL);
                    stack.push(kleene(code == opcode::AND, a, b));
                }
            }
        }
        out.push(stack.len() == 1 && stack[0] == 1);
    }
    Ok(out)
}

/// Whether an ordering satisfies the comparison with code `op` ([`CmpOp::code`]).
fn holds(order: std::cmp::Ordering, op: i32) -> bool {
    use std::cmp::Ordering::*;
    match op {
        0 => order == Equal,
        1 => order == Less,
        2 => order != Greater,
        3 => order == Greater,
        4 => order != Less,
        _ => order != Equal,
    }
}

/// A string column as `Utf8` (a no-op for `Utf8`; dictionaries and views are
/// materialised), the layout the device string slots use: offsets and bytes.
pub fn string_column(array: &dyn Array) -> Result<StringArray, EngineError> {
    let utf8 = arrow::compute::cast(array, &DataType::Utf8)?;
    Ok(utf8.as_string::<i32>().clone())
}

/// `value LIKE pattern` for a pattern whose only wildcard is `%` (no `_`, no escapes),
/// on bytes: the algorithm the device kernel runs. The first segment is a prefix, the
/// last a suffix, and the ones between are found leftmost-first in order, which is
/// exact for `%`-only patterns (and byte matching is exact on UTF-8 for them).
pub fn like_percent(value: &[u8], pattern: &[u8]) -> bool {
    let Some(first) = pattern.iter().position(|b| *b == b'%') else {
        return value == pattern;
    };
    let last = pattern.iter().rposition(|b| *b == b'%').unwrap_or(first);
    let (prefix, suffix) = (&pattern[..first], &pattern[last + 1..]);
    if prefix.len() + suffix.len() > value.len()
        || !value.starts_with(prefix)
        || !value.ends_with(suffix)
    {
        return false;
    }
    let (mut pos, end) = (prefix.len(), value.len() - suffix.len());
    for segment in pattern[first + 1..last.max(first + 1)].split(|b| *b == b'%') {
        if segment.is_empty() {
            continue;
        }
        match value[pos..end]
            .windows(segment.len())
            .position(|w| w == segment)
        {
            Some(at) => pos += at + segment.len(),
            None => return false,
        }
    }
    true
}

fn kleene(and: bool, a: u8, b: u8) -> u8 {
    let (dominant, other) = if and { (0, 1) } else { (1, 0) };
    if a == dominant || b == dominant {
        dominant
    } else if a == other && b == other {
        other
    } else {
        2
    }
}

/// Maps IEEE-754 bit patterns to integers ordered like `f64::total_cmp`.
fn total_order_key(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

#[cfg(test)]
mod tests;
