//! CPU grouped aggregation: one pass assigns each row its group, then one pass per
//! aggregate updates a dense accumulator vector indexed by group. Groups are numbered in
//! order of first appearance, so the output is deterministic for a given input.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, PrimitiveArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use arrow::datatypes::{ArrowPrimitiveType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;
use hashbrown::HashMap;
use oxidelake_core::EngineError;

use crate::ops::{AggFunc, AggSpec, HostAggregateArgs};

/// Keys spanning at most this many values are numbered through a lookup table instead
/// of a hash map (the common case for the low-cardinality keys v1 covers).
const DIRECT_SPAN: u64 = 1 << 16;

/// The groups of one batch, numbered in order of first appearance.
struct Groups {
    /// Group number of every row.
    ids: Vec<u32>,
    /// Key of every group (`None` is the NULL-key group).
    keys: Vec<Option<i64>>,
}

impl Groups {
    /// Returns the group of `key` through its lookup `slot`, opening the group if new.
    #[inline]
    fn assign(&mut self, slot: &mut u32, key: Option<i64>) -> u32 {
        if *slot == u32::MAX {
            *slot = self.keys.len() as u32;
            self.keys.push(key);
        }
        *slot
    }

    fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Numbers the groups of `keys` in order of first appearance.
fn group_ids(keys: &Int64Array) -> Groups {
    let mut groups = Groups {
        ids: Vec::with_capacity(keys.len()),
        keys: Vec::new(),
    };
    let (min, max) = (arrow::compute::min(keys), arrow::compute::max(keys));
    let span = min.zip(max).map(|(lo, hi)| hi.abs_diff(lo));
    let values = keys.values();
    let nulls = keys.nulls().filter(|n| n.null_count() > 0);
    match (min, span) {
        (Some(lo), Some(span)) if span < DIRECT_SPAN => {
            // slot 0 is the NULL group, slot 1 + (key - lo) the others.
            let mut slots = vec![u32::MAX; span as usize + 2];
            match nulls {
                None => {
                    for v in values {
                        let slot = &mut slots[1 + v.abs_diff(lo) as usize];
                        let id = groups.assign(slot, Some(*v));
                        groups.ids.push(id);
                    }
                }
                Some(nulls) => {
                    for (row, v) in values.iter().enumerate() {
                        let (slot, key) = if nulls.is_null(row) {
                            (0, None)
                        } else {
                            (1 + v.abs_diff(lo) as usize, Some(*v))
                        };
                        let id = groups.assign(&mut slots[slot], key);
                        groups.ids.push(id);
                    }
                }
            }
        }
        _ => {
            let mut index: HashMap<Option<i64>, u32> = HashMap::new();
            for row in 0..keys.len() {
                let key = keys.is_valid(row).then(|| values[row]);
                let slot = index.entry(key).or_insert(u32::MAX);
                let id = groups.assign(slot, key);
                groups.ids.push(id);
            }
        }
    }
    groups
}

/// Per-group accumulators and, where the input has nulls, the non-null count per group
/// (a group whose count stays 0 yields NULL).
struct Folded<T> {
    acc: Vec<T>,
    counts: Option<Vec<i64>>,
}

/// Folds `values` into per-group accumulators starting from `identity` with `f`.
/// Without nulls every group has a value, so no counts are kept and the inner loop is
/// one load, one op and one store per row.
fn fold<T: Copy>(
    values: &[T],
    nulls: Option<&NullBuffer>,
    groups: &Groups,
    identity: T,
    f: impl Fn(T, T) -> T,
) -> Folded<T> {
    fold_mapped(values, |v| v, nulls, groups, identity, f)
}

/// [`fold`] over `map(value)`: lets float MIN/MAX fold integer images without first
/// materialising them.
fn fold_mapped<V: Copy, T: Copy>(
    values: &[V],
    map: impl Fn(V) -> T,
    nulls: Option<&NullBuffer>,
    groups: &Groups,
    identity: T,
    f: impl Fn(T, T) -> T,
) -> Folded<T> {
    let mut acc = vec![identity; groups.len()];
    let ids = &groups.ids;
    match nulls {
        None => {
            for (v, g) in values.iter().zip(ids) {
                let slot = &mut acc[*g as usize];
                *slot = f(*slot, map(*v));
            }
            Folded { acc, counts: None }
        }
        Some(nulls) => {
            let mut counts = vec![0i64; groups.len()];
            for row in nulls.valid_indices() {
                let g = ids[row] as usize;
                acc[g] = f(acc[g], map(values[row]));
                counts[g] += 1;
            }
            Folded {
                acc,
                counts: Some(counts),
            }
        }
    }
}

fn finish<T: ArrowPrimitiveType>(folded: Folded<T::Native>) -> ArrayRef {
    let validity = folded
        .counts
        .map(|counts| NullBuffer::from_iter(counts.iter().map(|c| *c > 0)));
    Arc::new(PrimitiveArray::<T>::new(folded.acc.into(), validity))
}

fn count_only(values: &dyn Array, groups: &Groups) -> ArrayRef {
    let mut counts = vec![0i64; groups.len()];
    match values.logical_nulls().filter(|n| n.null_count() > 0) {
        None => groups.ids.iter().for_each(|g| counts[*g as usize] += 1),
        Some(n) => n
            .valid_indices()
            .for_each(|row| counts[groups.ids[row] as usize] += 1),
    }
    Arc::new(Int64Array::from(counts))
}

fn accumulate_i64(func: AggFunc, values: &Int64Array, groups: &Groups) -> ArrayRef {
    let nulls = values.nulls().filter(|n| n.null_count() > 0);
    let vals = values.values();
    let folded = match func {
        AggFunc::Count => return count_only(values, groups),
        AggFunc::Sum => fold(vals, nulls, groups, 0, i64::wrapping_add),
        AggFunc::Min => fold(vals, nulls, groups, i64::MAX, i64::min),
        AggFunc::Max => fold(vals, nulls, groups, i64::MIN, i64::max),
    };
    finish::<Int64Type>(folded)
}

/// Flips the magnitude bits of negative values: applied to an f64's bits it gives an
/// i64 ordered like `f64::total_cmp`, and applied again it gives the bits back.
#[inline]
fn total_order_flip(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// Float MIN/MAX under IEEE total order (NaN above +inf, -0.0 below +0.0), as DataFusion
/// orders floats. Folding the integer images turns each step into an integer min/max
/// with an identity (`i64::MAX` / `i64::MIN` image no float exceeds), with no float
/// compare in the loop.
fn float_min_max(
    func: AggFunc,
    values: &Float64Array,
    nulls: Option<&NullBuffer>,
    groups: &Groups,
) -> ArrayRef {
    let key = |v: f64| total_order_flip(v.to_bits() as i64);
    let values = values.values();
    let folded = if func == AggFunc::Min {
        fold_mapped(values, key, nulls, groups, i64::MAX, i64::min)
    } else {
        fold_mapped(values, key, nulls, groups, i64::MIN, i64::max)
    };
    let acc: Vec<f64> = folded
        .acc
        .iter()
        .map(|k| f64::from_bits(total_order_flip(*k) as u64))
        .collect();
    finish::<Float64Type>(Folded {
        acc,
        counts: folded.counts,
    })
}

fn accumulate_f64(func: AggFunc, values: &Float64Array, groups: &Groups) -> ArrayRef {
    let nulls = values.nulls().filter(|n| n.null_count() > 0);
    let vals = values.values();
    let folded = match func {
        AggFunc::Count => return count_only(values, groups),
        // Starts from 0.0 like DataFusion's SUM (so a lone -0.0 sums to 0.0 there too).
        AggFunc::Sum => fold(vals, nulls, groups, 0.0, |a, b| a + b),
        AggFunc::Min | AggFunc::Max => return float_min_max(func, values, nulls, groups),
    };
    finish::<Float64Type>(folded)
}

/// Aggregates one batch on the CPU (see [`HostAggregateArgs`] for the output layout).
pub(crate) fn aggregate(args: HostAggregateArgs<'_>) -> Result<RecordBatch, EngineError> {
    crate::ops::validate::aggregate(&args)?;
    let batch = args.batch;
    let keys = batch
        .column(args.group_column)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| {
            EngineError::Internal("group column is not Int64 after validation".into())
        })?;
    let groups = group_ids(keys);
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(groups.keys.clone()))];
    for AggSpec { func, column } in args.aggregates {
        let input = batch.column(*column);
        let out = match input.data_type() {
            DataType::Int64 => input
                .as_any()
                .downcast_ref::<Int64Array>()
                .map(|a| accumulate_i64(*func, a, &groups)),
            _ => input
                .as_any()
                .downcast_ref::<Float64Array>()
                .map(|a| accumulate_f64(*func, a, &groups)),
        }
        .ok_or_else(|| {
            EngineError::Internal("aggregate column type changed after validation".into())
        })?;
        columns.push(out);
    }
    Ok(RecordBatch::try_new(
        crate::ops::validate::aggregate_schema(&args)?,
        columns,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    Some(2),
                    Some(1),
                    None,
                    Some(2),
                ])),
                Arc::new(Int64Array::from(vec![
                    Some(i64::MAX),
                    None,
                    Some(1),
                    Some(5),
                    None,
                ])),
                Arc::new(Float64Array::from(vec![
                    Some(1.5),
                    None,
                    Some(f64::NAN),
                    Some(2.0),
                    None,
                ])),
            ],
        )
        .unwrap()
    }

    fn run(func: AggFunc, column: usize) -> (Vec<Option<i64>>, ArrayRef) {
        let b = batch();
        let out = aggregate(HostAggregateArgs {
            batch: &b,
            group_column: 0,
            aggregates: &[AggSpec { func, column }],
        })
        .unwrap();
        let keys = out
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .iter()
            .collect();
        (keys, Arc::clone(out.column(1)))
    }

    #[test]
    fn wide_key_spans_use_the_hash_map_and_number_groups_the_same_way() {
        let keys = Int64Array::from(vec![Some(i64::MAX), None, Some(-5), Some(i64::MAX), None]);
        let wide = group_ids(&keys);
        assert_eq!(wide.ids, vec![0, 1, 2, 0, 1]);
        assert_eq!(wide.keys, vec![Some(i64::MAX), None, Some(-5)]);
        let narrow = Int64Array::from(vec![Some(7), None, Some(-5), Some(7), None]);
        let narrow = group_ids(&narrow);
        assert_eq!(narrow.ids, wide.ids);
        assert_eq!(narrow.keys, vec![Some(7), None, Some(-5)]);
    }

    #[test]
    fn groups_appear_in_first_seen_order_with_null_as_its_own_group() {
        let (keys, _) = run(AggFunc::Count, 1);
        assert_eq!(keys, vec![Some(1), Some(2), None]);
    }

    #[test]
    fn integer_sum_wraps_on_overflow_and_is_null_without_values() {
        let (_, sums) = run(AggFunc::Sum, 1);
        let sums = sums.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(
            sums.iter().collect::<Vec<_>>(),
            vec![Some(i64::MIN), None, Some(5)]
        );
    }

    #[test]
    fn count_of_nothing_is_zero_not_null() {
        let (_, counts) = run(AggFunc::Count, 2);
        let counts = counts.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(
            counts.iter().collect::<Vec<_>>(),
            vec![Some(2), Some(0), Some(1)]
        );
    }

    #[test]
    fn nan_is_the_largest_float_for_min_and_max() {
        let (_, max) = run(AggFunc::Max, 2);
        let max = max.as_any().downcast_ref::<Float64Array>().unwrap();
        assert!(max.value(0).is_nan());
        let (_, min) = run(AggFunc::Min, 2);
        let min = min.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(min.value(0), 1.5);
        assert!(min.is_null(1));
    }

    #[test]
    fn float_min_and_max_follow_total_order_for_signed_zeros_and_negative_nan() {
        let neg_nan = f64::from_bits(f64::NAN.to_bits() | (1 << 63));
        let values = [0.0, -0.0, -1.5, f64::INFINITY, neg_nan, f64::NAN];
        let mut sorted = values;
        sorted.sort_by(f64::total_cmp);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, false),
                Field::new("f", DataType::Float64, false),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![1; values.len()])),
                Arc::new(Float64Array::from(values.to_vec())),
            ],
        )
        .unwrap();
        let out = |func| {
            let out = aggregate(HostAggregateArgs {
                batch: &batch,
                group_column: 0,
                aggregates: &[AggSpec { func, column: 1 }],
            })
            .unwrap();
            out.column(1)
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .value(0)
                .to_bits()
        };
        assert_eq!(out(AggFunc::Min), sorted[0].to_bits());
        assert_eq!(out(AggFunc::Max), sorted[sorted.len() - 1].to_bits());
        assert_eq!(sorted[0].to_bits(), neg_nan.to_bits());
        assert!(total_order_flip((-0.0f64).to_bits() as i64) < total_order_flip(0));
    }
}
