//! Arguments and results of the operators every backend implements over device batches
//! ([`crate::GpuBackend`]), and of their host edge ([`crate::edge`]: the `Host*`
//! arguments, for a host batch that crosses to the operator and back).
//!
//! Coverage is deliberately explicit (spec §2.3). Anything outside it is rejected with
//! [`oxidelake_core::EngineError::Unsupported`] before any work starts, and the operator
//! falls back to the CPU for that batch.

pub(crate) mod validate;

use arrow::array::{Float64Array, UInt32Array};

pub use crate::predicate::{
    CmpOp, ColumnPredicate, DeviceProgram, Literal, MAX_PROGRAM_STACK, Predicate, ValueClass,
    check_predicates, like_percent, literal_array, opcode, run_program_on_host, string_column,
    value_class, wide_decimal, write_images,
};
pub use crate::value::{
    Arith, ArithMode, MAX_VALUE_STACK, ValueColumn, ValueExpr, ValueProgram, YEAR_DAYS,
    check_value_column, evaluate_on_host, is_overflow, is_value_input, is_value_output,
    load_images, output_array, overflow_error, run_value_program_on_host, value_opcode,
    widened_to_int64, widens_exactly, year_of_days,
};

/// Computed columns of one batch ([`ValueColumn`]): each output array has its column's
/// type and one value per input row. A checked (decimal) value that needs more than 64
/// bits fails the batch with [`overflow_error`], and the operator computes it with
/// DataFusion instead.
#[derive(Debug, Clone, Copy)]
pub struct HostEvaluateArgs<'a> {
    /// The input rows.
    pub batch: &'a arrow::record_batch::RecordBatch,
    /// What to compute.
    pub columns: &'a [ValueColumn],
}

/// Where one column of a projection's output comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectedColumn {
    /// Input column `i`, passed through.
    Input(usize),
    /// The `i`-th computed column of [`EvaluateArgs::columns`].
    Computed(usize),
}

/// A projection of a batch that lives on the device into one that stays there
/// (ADR-0014): passed-through input columns and computed ones ([`ValueColumn`]), in the
/// order of `outputs`. As for [`HostEvaluateArgs`], a checked value needing more than 64
/// bits fails the batch with [`overflow_error`].
#[derive(Debug, Clone, Copy)]
pub struct EvaluateArgs<'a> {
    /// The input rows, on the device.
    pub batch: &'a crate::DeviceBatch,
    /// What to compute.
    pub columns: &'a [ValueColumn],
    /// The output columns, one per field of `schema`.
    pub outputs: &'a [ProjectedColumn],
    /// The output schema (names and types of the projection).
    pub schema: &'a arrow::datatypes::SchemaRef,
}

/// A fused filter and projection: keep rows where every predicate is true (NULL is not
/// true, as in SQL), then keep the `projection` columns in that order.
#[derive(Debug, Clone, Copy)]
pub struct HostFilterArgs<'a> {
    /// The input rows.
    pub batch: &'a arrow::record_batch::RecordBatch,
    /// Conjunction of predicates (empty = keep every row).
    pub predicates: &'a [Predicate],
    /// Input column indices to output.
    pub projection: &'a [usize],
}

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    /// Sum of non-null values; NULL when there are none; integers wrap on overflow.
    Sum,
    /// Number of non-null values (0 when there are none).
    Count,
    /// Smallest non-null value (NaN is the largest float); NULL when there are none.
    Min,
    /// Largest non-null value (NaN is the largest float); NULL when there are none.
    Max,
}

impl AggFunc {
    /// The SQL name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Sum => "sum",
            AggFunc::Count => "count",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
        }
    }
}

/// A grouped aggregation of a host batch ([`crate::edge::aggregate`]): the host side
/// of [`AggregateArgs`], with the same result.
#[derive(Debug, Clone, Copy)]
pub struct HostAggregateArgs<'a> {
    /// The input rows.
    pub batch: &'a arrow::record_batch::RecordBatch,
    /// The group key columns.
    pub keys: &'a [usize],
    /// The aggregates.
    pub aggregates: &'a [Agg],
}

/// What one aggregate over a device batch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggInput {
    /// Every row (COUNT(*)).
    Rows,
    /// The valid rows of a column of any type (COUNT(x)).
    Valid(usize),
    /// A column's 8-byte integer images: integers, dates, decimals (whose images are
    /// exact while a batch's values fit 64 bits).
    Int(usize),
    /// A column's images as `f64` (Float64).
    Float(usize),
    /// The low 32 bits of a column's images, zero-extended: with [`Self::High32`], a sum
    /// that cannot overflow (`high * 2^32 + low`) for batches under 2^31 rows.
    Low32(usize),
    /// The high 32 bits of a column's images, sign-extended.
    High32(usize),
}

impl AggInput {
    /// The column read, if any.
    pub fn column(self) -> Option<usize> {
        match self {
            AggInput::Rows => None,
            AggInput::Valid(c)
            | AggInput::Int(c)
            | AggInput::Float(c)
            | AggInput::Low32(c)
            | AggInput::High32(c) => Some(c),
        }
    }

    /// The same input over column `to(c)` instead of `c`.
    pub fn with_column(self, to: impl Fn(usize) -> usize) -> Self {
        match self {
            AggInput::Rows => AggInput::Rows,
            AggInput::Valid(c) => AggInput::Valid(to(c)),
            AggInput::Int(c) => AggInput::Int(to(c)),
            AggInput::Float(c) => AggInput::Float(to(c)),
            AggInput::Low32(c) => AggInput::Low32(to(c)),
            AggInput::High32(c) => AggInput::High32(to(c)),
        }
    }
}

/// One aggregate of [`AggregateArgs`]: `Count` over `Rows` or `Valid`, `Sum`
/// over `Int` (wrapping), `Float`, `Low32` or `High32`, `Min` / `Max` over `Int` or
/// `Float` (NaN the largest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Agg {
    /// The function.
    pub func: AggFunc,
    /// What it reads.
    pub input: AggInput,
}

/// A grouped aggregation of a batch that lives on the device (ADR-0014), grouped by the
/// values of `keys` (any number of columns of 8-byte images or strings; NULL is a value
/// of its own; none: one group of every row). The result comes back to the host: one row
/// per group, the key columns (with their Arrow types) then one column per aggregate:
/// Int64 for COUNT and the integer inputs, Float64 for `Float`, NULL where a group saw
/// no value (never for COUNT). Groups come in no particular order.
#[derive(Debug, Clone, Copy)]
pub struct AggregateArgs<'a> {
    /// The input rows, on the device.
    pub batch: &'a crate::DeviceBatch,
    /// The group key columns.
    pub keys: &'a [usize],
    /// The aggregates.
    pub aggregates: &'a [Agg],
}

impl AggregateArgs<'_> {
    /// The result's schema, the same on every backend: the key fields (nullable), then
    /// `a<i>` per aggregate (Float64 for a float aggregate other than COUNT, Int64
    /// otherwise).
    pub fn result_schema(&self) -> arrow::datatypes::SchemaRef {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = self.batch.schema();
        let mut fields: Vec<Field> = self
            .keys
            .iter()
            .map(|k| schema.field(*k).clone().with_nullable(true))
            .collect();
        fields.extend(self.aggregates.iter().enumerate().map(|(i, agg)| {
            let dt = match agg.input {
                AggInput::Float(_) if agg.func != AggFunc::Count => DataType::Float64,
                _ => DataType::Int64,
            };
            Field::new(format!("a{i}"), dt, true)
        }));
        std::sync::Arc::new(Schema::new(fields))
    }
}

/// Checks `aggregates` against `batch`'s columns and the pairs [`Agg`] allows.
pub fn check_aggregates(
    columns: usize,
    keys: &[usize],
    aggregates: &[Agg],
) -> Result<(), oxidelake_core::EngineError> {
    let out_of_range =
        |what: &'static str, c: usize| oxidelake_core::EngineError::InvalidArgument {
            what,
            detail: format!("column {c} of {columns}"),
        };
    if let Some(k) = keys.iter().find(|k| **k >= columns) {
        return Err(out_of_range("group key", *k));
    }
    for agg in aggregates {
        use AggInput as I;
        if let Some(c) = agg.input.column().filter(|c| *c >= columns) {
            return Err(out_of_range("aggregate input", c));
        }
        let allowed = matches!(
            (agg.func, agg.input),
            (AggFunc::Count, I::Rows | I::Valid(_))
                | (
                    AggFunc::Sum,
                    I::Int(_) | I::Float(_) | I::Low32(_) | I::High32(_)
                )
                | (AggFunc::Min | AggFunc::Max, I::Int(_) | I::Float(_))
        );
        if !allowed {
            return Err(oxidelake_core::EngineError::InvalidArgument {
                what: "device aggregate",
                detail: format!("{} over {:?}", agg.func.name(), agg.input),
            });
        }
    }
    Ok(())
}

/// Which probe rows a join takes ([`JoinArgs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRows {
    /// One row per matched pair, with its build row (an inner join).
    Pairs,
    /// Each probe row with at least one pair, once (a right semi join).
    Matched,
    /// Each probe row without a pair, NULL keys included (a right anti join).
    Unmatched,
}

/// Where one column of a [`JoinArgs`] join's output comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinColumn {
    /// Column `i` of the build side, at each pair's build row.
    Build(usize),
    /// Column `i` of the probe batch, at each output row's probe row.
    Probe(usize),
    /// Each pair's build row number (UInt32, no NULLs): for a caller that gathers the
    /// build rows itself, such as the host edge.
    BuildRow,
    /// Each output row's probe row number (UInt32, no NULLs).
    ProbeRow,
}

/// One digit of a mixed-radix join key over integer-like columns: column `column`'s
/// value minus `min`, which must be below `span`, times `stride` (as the host's radix
/// keys compute it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RadixDigit {
    /// The key column (8-byte images of the value widened to Int64).
    pub column: usize,
    /// The build side's smallest value.
    pub min: i64,
    /// Values from `min` on that are digits; any other has no key.
    pub span: u64,
    /// The digit's weight.
    pub stride: i64,
}

/// How a join reads its Int64 key from a device batch.
#[derive(Debug, Clone, Copy)]
pub enum JoinKey<'a> {
    /// One column's 8-byte images: the key widened to Int64.
    Column(usize),
    /// Several integer-like columns as one mixed-radix key; a row with a NULL or a value
    /// outside a digit's span has no key (it never matches).
    Radix(&'a [RadixDigit]),
}

/// A join of a probe batch with the build batch a table was built over, both batches of
/// the backend, whose output is one too (ADR-0015: the one probe operator): the probe key
/// is read as the build key was ([`JoinKey`]; NULL keys never match), and the output's
/// columns are gathered from both sides. Semi and anti joins ([`ProbeRows::Matched`],
/// [`ProbeRows::Unmatched`]) take probe columns only. The host edge probes host keys
/// with it, asking for row numbers ([`crate::edge::probe_join_table`]).
#[derive(Debug, Clone)]
pub struct JoinArgs<'a> {
    /// The build side the table was built over; `None` where the output takes none of
    /// its columns.
    pub build: Option<&'a crate::DeviceBatch>,
    /// The probe rows.
    pub probe: &'a crate::DeviceBatch,
    /// The probe key, read as the build key was.
    pub key: JoinKey<'a>,
    /// The output columns, in order.
    pub output: &'a [JoinColumn],
    /// Which rows.
    pub rows: ProbeRows,
    /// The output's schema (its field `i` has the type of `output[i]`'s column).
    pub schema: arrow::datatypes::SchemaRef,
}

/// The distance between vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DistanceMetric {
    /// Euclidean distance `sqrt(sum((a - q)^2))`.
    L2,
    /// `1 - dot(a, q) / (|a| |q|)`; NULL when either vector is all zeros.
    Cosine,
}

impl DistanceMetric {
    /// The name used in plans and SQL.
    pub fn name(self) -> &'static str {
        match self {
            DistanceMetric::L2 => "l2",
            DistanceMetric::Cosine => "cosine",
        }
    }
}

/// Distances between each row of a `FixedSizeList<Float32>` column and one query vector,
/// accumulated in f64; a NULL row (or one with a NULL element) gives NULL.
#[derive(Debug, Clone, Copy)]
pub struct VectorDistanceArgs<'a> {
    /// The vectors.
    pub vectors: &'a arrow::array::FixedSizeListArray,
    /// The query vector; its length must equal the list size.
    pub query: &'a [f32],
    /// Which distance.
    pub metric: DistanceMetric,
}

/// Result type of [`crate::GpuBackend::vector_distance`].
pub type Distances = Float64Array;

/// What a hash-join probe of the host edge brings back: matching row pairs
/// (`build_indices[i]` joins `probe_indices[i]`), or for a semi or anti join the probe
/// rows it keeps, with no build rows.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinMatches {
    /// Row indices into the build side.
    pub build_indices: UInt32Array,
    /// Row indices into the probe batch.
    pub probe_indices: UInt32Array,
}
