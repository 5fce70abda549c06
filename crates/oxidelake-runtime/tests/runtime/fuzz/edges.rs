//! The fuzzer's edge tables and the value classes it counts (issue 44).
//!
//! `edges` holds, in every float column (Float64 `f` and `e`, Float32 `r`), `+0.0`,
//! `-0.0`, NaN, `+inf` and `-inf` among halves in -50..50; in its integer columns the
//! extremes of their types (`ip` ≥ 0 with `i64::MAX`, `i64::MAX - 1` and 2^62; `ineg` ≤ 0
//! with `i64::MIN`, `i64::MIN + 1` and -2^62; Int32 `h` with both ends of Int32); in its
//! `DECIMAL(38, 0)` columns the 38-digit maximum, 5·10^37 and 10^37 (`dp` ≥ 0, `dn` ≤ 0).
//! Two of any big value of `ip`, `ineg`, `dp` or `dn` sum past their type, so a SUM over
//! them fails with an overflow error (on every placement, or the fuzzer reports the
//! difference; `h`'s SUM is an Int64, out of reach of Int32 values).
//!
//! `im` holds both ends of Int64 (`i64::MAX`, `i64::MAX - 1`, `i64::MAX - 2` and their
//! negations) among small values: in each group of `g` the first half of its ends (in
//! table order) are positive and the second half their negations, so the ends of a group
//! sum to 0 while the early partitions' partial sums lie past the top and the late ones'
//! past the bottom. A SUM of `im` over whole groups or the whole table fits, though its
//! partitions' partial sums do not; over the rows a predicate keeps, some totals do not
//! fit. Only the total may decide, on every placement and however the rows are
//! partitioned (issue 44: the partial aggregate placed for cpu used to fail on its own
//! partial sum). `edim` is a small table holding each of those values (and NULL) as join
//! keys.
//!
//! The data is the same for every `OXIDE_FUZZ_SEED` (its own fixed seeds), in four
//! partitions of batches of 512, 1 and 87 rows.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float32Array, Float64Array, Int32Array, Int64Array,
    StringArray,
};
use arrow::datatypes::{
    DataType, Decimal128Type, Field, Float32Type, Float64Type, Int32Type, Int64Type, Schema,
    SchemaRef,
};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use oxidelake_runtime::OxideSession;

use super::{Col, Kind, Query, Rng, Shape, Table};

/// Rows of `edges`: four partitions of [`BATCH_ROWS`].
pub const ROWS: usize = 4 * (512 + 1 + 87);
const BATCH_ROWS: [usize; 3] = [512, 1, 87];

/// The largest `DECIMAL(38, 0)`: 38 nines.
const DECIMAL38_MAX: i128 = 10i128.pow(38) - 1;

/// Literals at the edges, a quarter of the literals of the columns that have them. The
/// spellings are distinct (`+0.0`, not `0.0`) so that [`literal_classes`] finds them.
const FLOAT_EDGES: &[&str] = &[
    "+0.0",
    "-0.0",
    "CAST('NaN' AS DOUBLE)",
    "CAST('inf' AS DOUBLE)",
    "CAST('-inf' AS DOUBLE)",
];
const REAL_EDGES: &[&str] = &[
    "CAST(+0.0 AS REAL)",
    "CAST(-0.0 AS REAL)",
    "CAST('NaN' AS REAL)",
    "CAST('inf' AS REAL)",
    "CAST('-inf' AS REAL)",
    "-0.0",
    "CAST('NaN' AS DOUBLE)",
    "CAST('-inf' AS DOUBLE)",
];
const INT64_EDGES: &[&str] = &[
    "9223372036854775807",
    "9223372036854775806",
    "-9223372036854775808",
    "-9223372036854775807",
    "4611686018427387904",
    "-4611686018427387904",
];
/// Both ends of Int32, and one past each (the comparison then widens the column).
const INT32_EDGES: &[&str] = &[
    "2147483647",
    "-2147483648",
    "2147483646",
    "2147483648",
    "-2147483649",
];
const DECIMAL38_EDGES: &[&str] = &[
    "CAST('99999999999999999999999999999999999999' AS DECIMAL(38, 0))",
    "CAST('-99999999999999999999999999999999999999' AS DECIMAL(38, 0))",
    "CAST('50000000000000000000000000000000000000' AS DECIMAL(38, 0))",
    "CAST('-50000000000000000000000000000000000000' AS DECIMAL(38, 0))",
];

fn col(name: &'static str, kind: Kind, lo: i64, hi: i64, edges: &'static [&'static str]) -> Col {
    Col {
        name,
        kind,
        lo,
        hi,
        edges,
    }
}

/// `edges` as the query generator sees it (its key `g` has 8 values and NULL).
pub fn table() -> Table {
    Table {
        name: "edges",
        key: "g",
        cols: vec![
            col("id", Kind::Int, 0, ROWS as i64 - 1, &[]),
            col("g", Kind::Int, 0, 7, &[]),
            col("f", Kind::Float { real: false }, -100, 100, FLOAT_EDGES),
            col("e", Kind::Float { real: false }, -100, 100, FLOAT_EDGES),
            col("r", Kind::Float { real: true }, -100, 100, REAL_EDGES),
            col("ip", Kind::Extreme { bits: 64 }, 0, 100, INT64_EDGES),
            col("ineg", Kind::Extreme { bits: 64 }, -100, 0, INT64_EDGES),
            col("h", Kind::Extreme { bits: 32 }, -100, 100, INT32_EDGES),
            col("dp", Kind::WideDecimal, 0, 10_000, DECIMAL38_EDGES),
            col("dn", Kind::WideDecimal, -10_000, 0, DECIMAL38_EDGES),
            col("im", Kind::Extreme { bits: 64 }, -100, 100, INT64_EDGES),
        ],
    }
}

/// A SUM of the mixed-sign `im` (see the module docs): over whole groups of `g` or the
/// whole table, whose totals fit while partitions' partial sums leave Int64, or over the
/// rows `pred` keeps, whose totals may not fit.
pub fn mixed_sum(rng: &mut Rng, pred: &str) -> Query {
    let sql = match rng.below(4) {
        0 => "SELECT g, SUM(im), COUNT(im) FROM edges GROUP BY g".to_string(),
        1 => "SELECT SUM(im), MIN(im), MAX(im) FROM edges".to_string(),
        2 => format!("SELECT g, SUM(im), COUNT(*) FROM edges WHERE {pred} GROUP BY g"),
        _ => format!("SELECT SUM(im), COUNT(im) FROM edges WHERE {pred}"),
    };
    Query {
        sql,
        shape: Shape::Aggregate,
    }
}

/// A join of `edges` (rows filtered by `pred`) with `edim` on float keys (joined by
/// DataFusion: it matches `-0.0` with `+0.0`, NaN with NaN), on integer keys at their
/// types' extremes (GPU joins), two keys, semi and anti joins, and a left join whose ON
/// compares floats.
pub fn join(rng: &mut Rng, pred: &str) -> Query {
    let sql = match rng.below(6) {
        0 => format!("SELECT id, f, tag FROM edges JOIN edim ON f = dk WHERE {pred}"),
        1 => {
            let key = rng.pick(&["ip", "ineg"]);
            format!("SELECT id, {key}, tag, dk FROM edges JOIN edim ON {key} = ik WHERE {pred}")
        }
        2 => format!("SELECT id, h, e, tag FROM edges JOIN edim ON h = hk AND e = dk WHERE {pred}"),
        3 => format!(
            "SELECT id, f, ip FROM edges WHERE EXISTS (SELECT 1 FROM edim \
             WHERE ik = ip AND dk < f) AND {pred}"
        ),
        4 => format!(
            "SELECT id, e, r FROM edges WHERE NOT EXISTS (SELECT 1 FROM edim WHERE dk = e) \
             AND {pred}"
        ),
        _ => format!(
            "SELECT id, f, tag, ik FROM edges LEFT JOIN edim ON ineg = ik AND dk >= f \
             WHERE {pred}"
        ),
    };
    Query {
        sql,
        shape: Shape::Join,
    }
}

fn edges_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("g", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("e", DataType::Float64, true),
        Field::new("r", DataType::Float32, true),
        Field::new("ip", DataType::Int64, true),
        Field::new("ineg", DataType::Int64, true),
        Field::new("h", DataType::Int32, true),
        Field::new("dp", DataType::Decimal128(38, 0), true),
        Field::new("dn", DataType::Decimal128(38, 0), true),
        Field::new("im", DataType::Int64, true),
    ]))
}

/// The column of `im` in [`edges_schema`].
const IM: usize = 10;

/// NULL, the special floats (NaN of either sign), or a half in -50..50 (sums of halves
/// are exact in any order).
fn float_value(rng: &mut Rng) -> Option<f64> {
    match rng.below(100) {
        0..=7 => None,
        8..=13 => Some(0.0),
        14..=19 => Some(-0.0),
        20..=22 => Some(f64::NAN),
        // A NaN with its sign bit set (as `-x` of a NaN gives): below -inf in total order.
        23 => Some(-f64::NAN),
        24..=26 => Some(f64::INFINITY),
        27..=29 => Some(f64::NEG_INFINITY),
        _ => Some((rng.below(201) as f64 - 100.0) / 2.0),
    }
}

/// NULL, `i64::MAX`, `i64::MAX - 1`, 2^62 or 0..=100.
fn nonnegative_int64(rng: &mut Rng) -> Option<i64> {
    match rng.below(200) {
        0..=15 => None,
        16 => Some(i64::MAX),
        17 => Some(i64::MAX - 1),
        18..=21 => Some(1 << 62),
        _ => Some(rng.below(101) as i64),
    }
}

/// NULL, `i64::MIN`, `i64::MIN + 1`, -2^62 or -100..=0.
fn nonpositive_int64(rng: &mut Rng) -> Option<i64> {
    match rng.below(200) {
        0..=15 => None,
        16 => Some(i64::MIN),
        17 => Some(i64::MIN + 1),
        18..=21 => Some(-(1 << 62)),
        _ => Some(-(rng.below(101) as i64)),
    }
}

fn int32_value(rng: &mut Rng) -> Option<i32> {
    match rng.below(100) {
        0..=7 => None,
        8 | 9 => Some(i32::MAX),
        10 | 11 => Some(i32::MIN),
        12 => Some(i32::MAX - 1),
        13 => Some(i32::MIN + 1),
        _ => Some(rng.below(201) as i32 - 100),
    }
}

/// Where `im` holds an end of Int64: its sign and magnitude are [`balance_mixed_ends`]'s.
const MIXED_END: i64 = i64::MAX;

/// NULL, an end of Int64 ([`MIXED_END`], to be balanced) or -100..=100.
fn mixed_int64(rng: &mut Rng) -> Option<i64> {
    match rng.below(200) {
        0..=15 => None,
        16..=25 => Some(MIXED_END),
        _ => Some(rng.below(201) as i64 - 100),
    }
}

/// The ends of `im` in `partitions`, balanced per group of `g` (see the module docs):
/// of a group's `n` ends in table order, the `j`-th of the first `n / 2` becomes
/// `i64::MAX - j % 3`, the `j`-th of the next `n / 2` its negation, and an odd one out
/// a small value, so that every group's ends sum to 0.
fn balance_mixed_ends(partitions: Vec<Vec<RecordBatch>>) -> Vec<Vec<RecordBatch>> {
    let ends = |batch: &RecordBatch| -> Vec<(Option<i64>, bool)> {
        let g = batch.column(1).as_primitive::<Int64Type>();
        let im = batch.column(IM).as_primitive::<Int64Type>();
        (0..batch.num_rows())
            .map(|row| {
                (
                    g.is_valid(row).then(|| g.value(row)),
                    im.is_valid(row) && im.value(row) == MIXED_END,
                )
            })
            .collect()
    };
    let mut per_group: HashMap<Option<i64>, usize> = HashMap::new();
    for batch in partitions.iter().flatten() {
        for (group, end) in ends(batch) {
            *per_group.entry(group).or_default() += usize::from(end);
        }
    }
    let mut seen: HashMap<Option<i64>, usize> = HashMap::new();
    partitions
        .into_iter()
        .map(|batches| {
            batches
                .into_iter()
                .map(|batch| {
                    let old = batch.column(IM).as_primitive::<Int64Type>().clone();
                    let im: Int64Array = ends(&batch)
                        .into_iter()
                        .enumerate()
                        .map(|(row, (group, end))| {
                            if !end {
                                return old.is_valid(row).then(|| old.value(row));
                            }
                            let pairs = per_group[&group] / 2;
                            let j = seen.entry(group).or_default();
                            let k = *j;
                            *j += 1;
                            let magnitude = |j: usize| i64::MAX - (j % 3) as i64;
                            Some(if k < pairs {
                                magnitude(k)
                            } else if k < 2 * pairs {
                                -magnitude(k - pairs)
                            } else {
                                7
                            })
                        })
                        .collect();
                    let mut columns = batch.columns().to_vec();
                    columns[IM] = Arc::new(im);
                    RecordBatch::try_new(batch.schema(), columns).unwrap()
                })
                .collect()
        })
        .collect()
}

/// NULL, the 38-digit maximum, 5·10^37, 10^37 or 0..=10,000.
fn nonnegative_decimal38(rng: &mut Rng) -> Option<i128> {
    match rng.below(200) {
        0..=15 => None,
        16 => Some(DECIMAL38_MAX),
        17..=19 => Some(5 * 10i128.pow(37)),
        20..=23 => Some(10i128.pow(37)),
        _ => Some(i128::from(rng.below(10_001))),
    }
}

fn decimal38(values: impl IntoIterator<Item = Option<i128>>) -> ArrayRef {
    Arc::new(
        values
            .into_iter()
            .collect::<Decimal128Array>()
            .with_precision_and_scale(38, 0)
            .unwrap(),
    )
}

/// Rows `first_id..first_id + rows` of `edges`, `im` from its own generator `im_rng` (so
/// the other columns are what they were before it came) with its ends still unbalanced.
fn edges_batch(rng: &mut Rng, im_rng: &mut Rng, first_id: usize, rows: usize) -> RecordBatch {
    let id = Int64Array::from_iter_values((first_id..first_id + rows).map(|i| i as i64));
    let g =
        Int64Array::from_iter((0..rows).map(|_| (rng.below(16) != 0).then(|| rng.below(8) as i64)));
    let f = Float64Array::from_iter((0..rows).map(|_| float_value(rng)));
    let e = Float64Array::from_iter((0..rows).map(|_| float_value(rng)));
    let r = Float32Array::from_iter((0..rows).map(|_| float_value(rng).map(|v| v as f32)));
    let ip = Int64Array::from_iter((0..rows).map(|_| nonnegative_int64(rng)));
    let ineg = Int64Array::from_iter((0..rows).map(|_| nonpositive_int64(rng)));
    let h = Int32Array::from_iter((0..rows).map(|_| int32_value(rng)));
    let dp = decimal38((0..rows).map(|_| nonnegative_decimal38(rng)));
    let dn = decimal38((0..rows).map(|_| nonnegative_decimal38(rng).map(|v| -v)));
    let im = Int64Array::from_iter((0..rows).map(|_| mixed_int64(im_rng)));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(id),
        Arc::new(g),
        Arc::new(f),
        Arc::new(e),
        Arc::new(r),
        Arc::new(ip),
        Arc::new(ineg),
        Arc::new(h),
        dp,
        dn,
        Arc::new(im),
    ];
    RecordBatch::try_new(edges_schema(), columns).unwrap()
}

/// The partitions of `edges`.
pub fn edges_partitions() -> Vec<Vec<RecordBatch>> {
    let mut rng = Rng(0xED6E_5EED);
    let mut im_rng = Rng(0x1A1A_5EED);
    let mut first_id = 0;
    let partitions = (0..4)
        .map(|_| {
            BATCH_ROWS
                .iter()
                .map(|&rows| {
                    let batch = edges_batch(&mut rng, &mut im_rng, first_id, rows);
                    first_id += rows;
                    batch
                })
                .collect()
        })
        .collect();
    balance_mixed_ends(partitions)
}

/// `edim`: 26 rows whose keys cycle through the special floats, the Int64 and Int32
/// extremes and NULL.
fn edim_batch() -> RecordBatch {
    let floats = [
        Some(0.0),
        Some(-0.0),
        Some(f64::NAN),
        Some(f64::INFINITY),
        Some(f64::NEG_INFINITY),
        Some(0.5),
        Some(-0.5),
        Some(1.0),
        Some(12.5),
        None,
    ];
    let int64s = [
        Some(i64::MAX),
        Some(i64::MAX - 1),
        Some(i64::MIN),
        Some(i64::MIN + 1),
        Some(1 << 62),
        Some(-(1 << 62)),
        Some(0),
        Some(1),
        Some(50),
        Some(-50),
        None,
    ];
    let int32s = [
        Some(i32::MAX),
        Some(i32::MIN),
        Some(0),
        Some(-1),
        Some(7),
        None,
    ];
    let rows = 26;
    let schema = Arc::new(Schema::new(vec![
        Field::new("dk", DataType::Float64, true),
        Field::new("ik", DataType::Int64, true),
        Field::new("hk", DataType::Int32, true),
        Field::new("tag", DataType::Utf8, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Float64Array::from_iter(
                (0..rows).map(|i| floats[i % floats.len()]),
            )),
            Arc::new(Int64Array::from_iter(
                (0..rows).map(|i| int64s[i % int64s.len()]),
            )),
            Arc::new(Int32Array::from_iter(
                (0..rows).map(|i| int32s[i % int32s.len()]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("d{i}")),
            )),
        ],
    )
    .unwrap()
}

/// Registers `edges` and `edim` as in-memory tables of `session`.
pub fn register(session: &OxideSession) {
    let edges = MemTable::try_new(edges_schema(), edges_partitions()).unwrap();
    session
        .context()
        .register_table("edges", Arc::new(edges))
        .unwrap();
    let dim = edim_batch();
    let edim = MemTable::try_new(dim.schema(), vec![vec![dim]]).unwrap();
    session
        .context()
        .register_table("edim", Arc::new(edim))
        .unwrap();
}

/// The value classes the fuzzer counts.
#[derive(Clone, Copy)]
pub enum Class {
    PosZero,
    NegZero,
    Nan,
    PosInf,
    NegInf,
    Int32Edge,
    Int64Edge,
    Decimal38Edge,
}

pub const CLASSES: [Class; 8] = [
    Class::PosZero,
    Class::NegZero,
    Class::Nan,
    Class::PosInf,
    Class::NegInf,
    Class::Int32Edge,
    Class::Int64Edge,
    Class::Decimal38Edge,
];

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::PosZero => "pos_zero",
            Class::NegZero => "neg_zero",
            Class::Nan => "nan",
            Class::PosInf => "pos_inf",
            Class::NegInf => "neg_inf",
            Class::Int32Edge => "int32_edge",
            Class::Int64Edge => "int64_edge",
            Class::Decimal38Edge => "decimal38_edge",
        }
    }

    /// How a literal of the class is spelled in the generated SQL (see the `*_EDGES`
    /// lists; random literals never take these forms).
    fn spellings(self) -> &'static [&'static str] {
        match self {
            Class::PosZero => &["+0.0"],
            Class::NegZero => &["-0.0"],
            Class::Nan => &["'NaN'"],
            Class::PosInf => &["'inf'"],
            Class::NegInf => &["'-inf'"],
            Class::Int32Edge => &["214748364"],
            Class::Int64Edge => &["922337203685477580", "4611686018427387904"],
            Class::Decimal38Edge => &[
                "99999999999999999999999999999999999999",
                "50000000000000000000000000000000000000",
            ],
        }
    }
}

fn float_class(v: f64) -> Option<Class> {
    if v.is_nan() {
        Some(Class::Nan)
    } else if v == f64::INFINITY {
        Some(Class::PosInf)
    } else if v == f64::NEG_INFINITY {
        Some(Class::NegInf)
    } else if v == 0.0 {
        Some(if v.is_sign_negative() {
            Class::NegZero
        } else {
            Class::PosZero
        })
    } else {
        None
    }
}

/// A count per [`Class`].
#[derive(Clone, Copy, Default)]
pub struct ClassCounts([usize; CLASSES.len()]);

impl ClassCounts {
    fn bump(&mut self, class: Option<Class>) {
        if let Some(class) = class {
            self.0[class as usize] += 1;
        }
    }

    /// Adds one to every class `other` counted at least once.
    pub fn add_presence(&mut self, other: &ClassCounts) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += usize::from(theirs > 0);
        }
    }

    /// The classes counted zero times, by name.
    pub fn missing(&self) -> Vec<&'static str> {
        CLASSES
            .iter()
            .filter(|c| self.0[**c as usize] == 0)
            .map(|c| c.name())
            .collect()
    }

    /// `pos_zero=3 neg_zero=1 ...`.
    pub fn describe(&self) -> String {
        CLASSES
            .iter()
            .map(|c| format!("{}={}", c.name(), self.0[*c as usize]))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How many cells of `batches` hold each class: the special floats (Float64 and
/// Float32), Int64 values at least 2^62 from zero, Int32 values within one of either end,
/// decimals of 38 digits (at least 10^37 from zero).
pub fn cells_by_class(batches: &[RecordBatch]) -> ClassCounts {
    let mut counts = ClassCounts::default();
    for column in batches.iter().flat_map(|b| b.columns()) {
        match column.data_type() {
            DataType::Float64 => column
                .as_primitive::<Float64Type>()
                .iter()
                .flatten()
                .for_each(|v| counts.bump(float_class(v))),
            DataType::Float32 => column
                .as_primitive::<Float32Type>()
                .iter()
                .flatten()
                .for_each(|v| counts.bump(float_class(f64::from(v)))),
            DataType::Int64 => column
                .as_primitive::<Int64Type>()
                .iter()
                .flatten()
                .for_each(|v| {
                    counts.bump((v.unsigned_abs() >= 1 << 62).then_some(Class::Int64Edge));
                }),
            DataType::Int32 => column
                .as_primitive::<Int32Type>()
                .iter()
                .flatten()
                .for_each(|v| {
                    let edge = !(i32::MIN + 2..=i32::MAX - 2).contains(&v);
                    counts.bump(edge.then_some(Class::Int32Edge));
                }),
            DataType::Decimal128(_, _) => column
                .as_primitive::<Decimal128Type>()
                .iter()
                .flatten()
                .for_each(|v| {
                    let edge = v.unsigned_abs() >= 10u128.pow(37);
                    counts.bump(edge.then_some(Class::Decimal38Edge));
                }),
            _ => {}
        }
    }
    counts
}

/// One for every class a literal of `sql` has.
pub fn literal_classes(sql: &str) -> ClassCounts {
    let mut counts = ClassCounts::default();
    for class in CLASSES {
        if class.spellings().iter().any(|s| sql.contains(s)) {
            counts.bump(Some(class));
        }
    }
    counts
}
