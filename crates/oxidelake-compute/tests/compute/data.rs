//! Seeded random batches for the conformance suite.

use std::sync::Arc;

use arrow::array::{ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
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

/// k: skewed low-cardinality key with NULLs; a: Int64 with NULLs and extremes;
/// b: Float64 with NULLs and NaN; c: Float64 with NULLs, no NaN; v: vectors.
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
        _ => Some(rng.below(201) as i64 - 100),
    }));
    let b = Float64Array::from_iter((0..rows).map(|_| match rng.below(100) {
        0..=9 => None,
        10..=12 => Some(f64::NAN),
        _ => Some((rng.below(10_001) as f64 - 5_000.0) / 100.0),
    }));
    let c = Float64Array::from_iter(
        (0..rows).map(|_| (!rng.chance(10)).then(|| (rng.below(2_001) as f64 - 1_000.0) / 8.0)),
    );
    let mut values = Vec::with_capacity(rows * DIM as usize);
    let mut valid = Vec::with_capacity(rows);
    for _ in 0..rows {
        let zero = rng.chance(5);
        for _ in 0..DIM {
            values.push(if zero {
                0.0
            } else {
                (rng.below(2_001) as f32 - 1_000.0) / 64.0
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
