//! Seeded random batches for the conformance suite.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeListArray, Float32Array, Float64Array, Int64Array,
};
use arrow::datatypes::{DataType, Field, Float32Type, Float64Type, Int64Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

/// SplitMix64: tiny, seeded, and the same on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub const DIM: i32 = 4;

/// k: skewed low-cardinality key with NULLs; a: Int64 with NULLs and both ends of Int64;
/// b: Float64 with NULLs, NaN, ±0.0 and ±inf; c: Float64 with NULLs, ±0.0 and ±inf, no
/// NaN; v: vectors, some of whose components are NaN, ±inf or -0.0.
pub fn schema() -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Float64, true),
        Field::new("c", DataType::Float64, true),
        Field::new("v", DataType::FixedSizeList(item, DIM), true),
    ]))
}

pub fn batch(rng: &mut Rng, rows: usize, key_range: u64) -> RecordBatch {
    let k = Int64Array::from_iter((0..rows).map(|_| {
        if rng.chance(10) {
            None
        } else if rng.chance(40) {
            Some(0) // skew: a heavy hitter
        } else {
            Some(rng.below(key_range) as i64)
        }
    }));
    let a = Int64Array::from_iter((0..rows).map(|_| match rng.below(100) {
        0..=9 => None,
        10 => Some(i64::MAX),
        11 => Some(i64::MIN + 1),
        12 => Some(i64::MIN),
        _ => Some(rng.below(201) as i64 - 100),
    }));
    let b = Float64Array::from_iter((0..rows).map(|_| match rng.below(100) {
        0..=9 => None,
        10..=12 => Some(f64::NAN),
        13 | 14 => Some(0.0),
        15 | 16 => Some(-0.0),
        17 => Some(f64::INFINITY),
        18 => Some(f64::NEG_INFINITY),
        _ => Some((rng.below(10_001) as f64 - 5_000.0) / 100.0),
    }));
    let c = Float64Array::from_iter((0..rows).map(|_| match rng.below(100) {
        0..=9 => None,
        10 | 11 => Some(0.0),
        12 | 13 => Some(-0.0),
        14 => Some(f64::INFINITY),
        15 => Some(f64::NEG_INFINITY),
        _ => Some((rng.below(2_001) as f64 - 1_000.0) / 8.0),
    }));
    let mut values = Vec::with_capacity(rows * DIM as usize);
    let mut valid = Vec::with_capacity(rows);
    for _ in 0..rows {
        // All-zero vectors (positive or negative zeros: cosine distance is NULL for both),
        // and vectors with one NaN, infinite or negative-zero component.
        let zero = match rng.below(100) {
            0..=2 => Some(0.0),
            3 | 4 => Some(-0.0),
            _ => None,
        };
        let special = rng.chance(8).then(|| {
            let at = rng.below(DIM as u64) as usize;
            let value = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0][rng.below(4) as usize];
            (at, value)
        });
        for i in 0..DIM as usize {
            values.push(match (zero, special) {
                (Some(z), _) => z,
                (None, Some((at, value))) if at == i => value,
                _ => (rng.below(2_001) as f32 - 1_000.0) / 64.0,
            });
        }
        valid.push(!rng.chance(8));
    }
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let v = FixedSizeListArray::new(
        item,
        DIM,
        Arc::new(Float32Array::from(values)),
        Some(valid.into()),
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(k),
        Arc::new(a),
        Arc::new(b),
        Arc::new(c),
        Arc::new(v),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

/// Partitioned input of one case: 1..=4 partitions of 0..=3 batches whose sizes include
/// 0, 1 and odd counts.
pub fn partitions(rng: &mut Rng, key_range: u64) -> Vec<Vec<RecordBatch>> {
    const SIZES: [usize; 7] = [0, 1, 3, 7, 64, 255, 1025];
    let parts = 1 + rng.below(4) as usize;
    (0..parts)
        .map(|_| {
            let batches = rng.below(4) as usize;
            (0..batches)
                .map(|_| {
                    let rows = SIZES[rng.below(SIZES.len() as u64) as usize];
                    batch(rng, rows, key_range)
                })
                .collect()
        })
        .collect()
}

/// How often one float column holds each edge value.
#[derive(Debug, Default, Clone, Copy)]
pub struct FloatEdges {
    pub pos_zero: usize,
    pub neg_zero: usize,
    pub nan: usize,
    pub pos_inf: usize,
    pub neg_inf: usize,
}

impl FloatEdges {
    fn add(&mut self, v: f64) {
        if v.is_nan() {
            self.nan += 1;
        } else if v == f64::INFINITY {
            self.pos_inf += 1;
        } else if v == f64::NEG_INFINITY {
            self.neg_inf += 1;
        } else if v == 0.0 && v.is_sign_negative() {
            self.neg_zero += 1;
        } else if v == 0.0 {
            self.pos_zero += 1;
        }
    }

    /// Whether both zeros and both infinities occurred.
    pub fn has_signed_zeros_and_infinities(&self) -> bool {
        self.pos_zero > 0 && self.neg_zero > 0 && self.pos_inf > 0 && self.neg_inf > 0
    }

    fn describe(&self) -> String {
        format!(
            "pos_zero={} neg_zero={} nan={} pos_inf={} neg_inf={}",
            self.pos_zero, self.neg_zero, self.nan, self.pos_inf, self.neg_inf
        )
    }
}

/// How often the seeded columns ([`batch`]) hold their edge values: the floats of b, c
/// and of the vectors' components (valid vectors only), and a at both ends of Int64.
#[derive(Debug, Default, Clone, Copy)]
pub struct EdgeCounts {
    pub b: FloatEdges,
    pub c: FloatEdges,
    pub vectors: FloatEdges,
    pub int64_max: usize,
    pub int64_min: usize,
}

impl EdgeCounts {
    /// Adds the cells of `parts` (batches of [`schema`]).
    pub fn add(&mut self, parts: &[Vec<RecordBatch>]) {
        for batch in parts.iter().flatten() {
            for a in batch.column(1).as_primitive::<Int64Type>().iter().flatten() {
                self.int64_max += usize::from(a == i64::MAX);
                self.int64_min += usize::from(a == i64::MIN);
            }
            for (column, edges) in [(2, &mut self.b), (3, &mut self.c)] {
                let floats = batch.column(column).as_primitive::<Float64Type>();
                floats.iter().flatten().for_each(|v| edges.add(v));
            }
            let vectors = batch.column(4).as_fixed_size_list();
            for row in (0..vectors.len()).filter(|row| vectors.is_valid(*row)) {
                let components = vectors.value(row);
                let components = components.as_primitive::<Float32Type>();
                components
                    .iter()
                    .flatten()
                    .for_each(|v| self.vectors.add(f64::from(v)));
            }
        }
    }

    /// `b: pos_zero=.. ...; c: ...; vector components: ...; a: int64_max=.. int64_min=..`.
    pub fn describe(&self) -> String {
        format!(
            "b: {}; c: {}; vector components: {}; a: int64_max={} int64_min={}",
            self.b.describe(),
            self.c.describe(),
            self.vectors.describe(),
            self.int64_max,
            self.int64_min
        )
    }
}
