//! CPU grouped aggregation: one pass assigns each row its group, then one pass per
//! aggregate updates a dense accumulator vector indexed by group. Groups are numbered in
//! order of first appearance, so the output is deterministic for a given input.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, PrimitiveArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{ArrowPrimitiveType, Float64Type, Int64Type};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use hashbrown::HashMap;
use oxidelake_core::EngineError;

use crate::ops::{AggFunc, AggSpec, AggregateArgs};

/// Checks column types against the v1 coverage.
pub(crate) fn validate(args: &AggregateArgs<'_>) -> Result<(), EngineError> {
    let schema = args.batch.schema();
    let column_type = |i: usize| {
        schema
            .fields()
            .get(i)
            .map(|f| f.data_type().clone())
            .ok_or_else(|| EngineError::InvalidArgument {
                what: "aggregate column",
                detail: format!("index {i} out of {} columns", schema.fields().len()),
            })
    };
    if column_type(args.group_column)? != DataType::Int64 {
        return Err(EngineError::unsupported(
            "group-by key",
            "only a single Int64 key is covered in v1",
        ));
    }
    for spec in args.aggregates {
        let dt = column_type(spec.column)?;
        if !matches!(dt, DataType::Int64 | DataType::Float64) {
            return Err(EngineError::unsupported(
                "aggregate input",
                format!(
                    "{}({dt}) is outside the Int64/Float64 coverage",
                    spec.func.name()
                ),
            ));
        }
    }
    Ok(())
}

/// The layout of [`aggregate`]'s output: the key, then `func(column)` per aggregate.
pub(crate) fn output_schema(
    args: &AggregateArgs<'_>,
) -> Result<arrow::datatypes::SchemaRef, EngineError> {
    let schema = args.batch.schema();
    let key_field = schema.field(args.group_column);
    let mut fields = vec![Field::new(key_field.name(), DataType::Int64, true)];
    for AggSpec { func, column } in args.aggregates {
        let input_field = schema.field(*column);
        fields.push(Field::new(
            format!("{}({})", func.name(), input_field.name()),
            func.output_type(input_field.data_type()),
            *func != AggFunc::Count,
        ));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Keys spanning at most this many values are numbered through a lookup table instead
/// of a hash map (the common case for the low-cardinality keys v1 covers).
const DIRECT_SPAN: u64 = 1 << 16;

/// Numbers the groups of `keys` in order of first appearance: (group per row, key per group).
fn group_ids(keys: &Int64Array) -> (Vec<u32>, Vec<Option<i64>>) {
    let mut distinct: Vec<Option<i64>> = Vec::new();
    let mut ids = Vec::with_capacity(keys.len());
    let (min, max) = (arrow::compute::min(keys), arrow::compute::max(keys));
    let span = min.zip(max).map(|(lo, hi)| hi.abs_diff(lo));
    match (min, span) {
        (Some(lo), Some(span)) if span < DIRECT_SPAN => {
            // slot 0 is the NULL group, slot 1 + (key - lo) the others.
            let mut slots = vec![u32::MAX; span as usize + 2];
            let values = keys.values();
            for row in 0..keys.len() {
                let (slot, key) = if keys.is_null(row) {
                    (0usize, None)
                } else {
                    let v = values[row];
                    (1 + v.abs_diff(lo) as usize, Some(v))
                };
                if slots[slot] == u32::MAX {
                    slots[slot] = distinct.len() as u32;
                    distinct.push(key);
                }
                ids.push(slots[slot]);
            }
        }
        _ => {
            let mut index: HashMap<Option<i64>, u32> = HashMap::new();
            for row in 0..keys.len() {
                let key = keys.is_valid(row).then(|| keys.value(row));
                let id = *index.entry(key).or_insert_with(|| {
                    distinct.push(key);
                    (distinct.len() - 1) as u32
                });
                ids.push(id);
            }
        }
    }
    (ids, distinct)
}

/// Folds `values` into per-group accumulators with `f`, counting non-null values per
/// group. With `identity`, accumulators start from it (branch-free inner loop); without,
/// a group's first value is taken as is — needed for float MIN/MAX under total order,
/// where no value is below or above every NaN payload.
fn fold<T: Copy>(
    values: &[T],
    nulls: Option<&NullBuffer>,
    ids: &[u32],
    acc: &mut [T],
    counts: &mut [i64],
    identity: Option<T>,
    f: impl Fn(T, T) -> T,
) {
    match (identity, nulls) {
        (Some(id), None) => {
            acc.iter_mut().for_each(|a| *a = id);
            for (v, g) in values.iter().zip(ids) {
                let g = *g as usize;
                acc[g] = f(acc[g], *v);
                counts[g] += 1;
            }
        }
        (identity, nulls) => {
            if let Some(id) = identity {
                acc.iter_mut().for_each(|a| *a = id);
            }
            for (row, (v, g)) in values.iter().zip(ids).enumerate() {
                if nulls.is_some_and(|n| n.is_null(row)) {
                    continue;
                }
                let g = *g as usize;
                acc[g] = if identity.is_none() && counts[g] == 0 {
                    *v
                } else {
                    f(acc[g], *v)
                };
                counts[g] += 1;
            }
        }
    }
}

fn finish<T: ArrowPrimitiveType>(acc: Vec<T::Native>, counts: &[i64]) -> ArrayRef {
    let validity = NullBuffer::from_iter(counts.iter().map(|c| *c > 0));
    Arc::new(PrimitiveArray::<T>::new(acc.into(), Some(validity)))
}

fn count_only(values: &dyn Array, ids: &[u32], groups: usize) -> ArrayRef {
    let mut counts = vec![0i64; groups];
    match values.logical_nulls().filter(|n| n.null_count() > 0) {
        None => ids.iter().for_each(|g| counts[*g as usize] += 1),
        Some(n) => ids
            .iter()
            .enumerate()
            .filter(|(row, _)| n.is_valid(*row))
            .for_each(|(_, g)| counts[*g as usize] += 1),
    }
    Arc::new(Int64Array::from(counts))
}

fn accumulate_i64(func: AggFunc, values: &Int64Array, ids: &[u32], groups: usize) -> ArrayRef {
    if func == AggFunc::Count {
        return count_only(values, ids, groups);
    }
    let (mut acc, mut counts) = (vec![0i64; groups], vec![0i64; groups]);
    let nulls = values.nulls().filter(|n| n.null_count() > 0);
    let vals = values.values();
    match func {
        AggFunc::Sum => fold(
            vals,
            nulls,
            ids,
            &mut acc,
            &mut counts,
            Some(0),
            i64::wrapping_add,
        ),
        AggFunc::Min => fold(
            vals,
            nulls,
            ids,
            &mut acc,
            &mut counts,
            Some(i64::MAX),
            i64::min,
        ),
        _ => fold(
            vals,
            nulls,
            ids,
            &mut acc,
            &mut counts,
            Some(i64::MIN),
            i64::max,
        ),
    }
    finish::<Int64Type>(acc, &counts)
}

fn accumulate_f64(func: AggFunc, values: &Float64Array, ids: &[u32], groups: usize) -> ArrayRef {
    if func == AggFunc::Count {
        return count_only(values, ids, groups);
    }
    let (mut acc, mut counts) = (vec![0f64; groups], vec![0i64; groups]);
    let nulls = values.nulls().filter(|n| n.null_count() > 0);
    let vals = values.values();
    match func {
        // Starts from 0.0 like DataFusion's SUM (so a lone -0.0 sums to 0.0 there too).
        AggFunc::Sum => fold(
            vals,
            nulls,
            ids,
            &mut acc,
            &mut counts,
            Some(0.0),
            |a, b| a + b,
        ),
        AggFunc::Min => fold(
            vals,
            nulls,
            ids,
            &mut acc,
            &mut counts,
            None,
            |a: f64, b: f64| {
                if b.total_cmp(&a).is_lt() { b } else { a }
            },
        ),
        _ => fold(
            vals,
            nulls,
            ids,
            &mut acc,
            &mut counts,
            None,
            |a: f64, b: f64| {
                if b.total_cmp(&a).is_gt() { b } else { a }
            },
        ),
    }
    finish::<Float64Type>(acc, &counts)
}

/// Aggregates one batch on the CPU (see [`AggregateArgs`] for the output layout).
pub(crate) fn aggregate(args: AggregateArgs<'_>) -> Result<RecordBatch, EngineError> {
    validate(&args)?;
    let batch = args.batch;
    let keys = batch
        .column(args.group_column)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| {
            EngineError::Internal("group column is not Int64 after validation".into())
        })?;
    let (ids, distinct) = group_ids(keys);
    let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(distinct.clone()))];
    for AggSpec { func, column } in args.aggregates {
        let input = batch.column(*column);
        let out = match input.data_type() {
            DataType::Int64 => input
                .as_any()
                .downcast_ref::<Int64Array>()
                .map(|a| accumulate_i64(*func, a, &ids, distinct.len())),
            _ => input
                .as_any()
                .downcast_ref::<Float64Array>()
                .map(|a| accumulate_f64(*func, a, &ids, distinct.len())),
        }
        .ok_or_else(|| {
            EngineError::Internal("aggregate column type changed after validation".into())
        })?;
        columns.push(out);
    }
    Ok(RecordBatch::try_new(output_schema(&args)?, columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let out = aggregate(AggregateArgs {
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
        let (ids, distinct) = group_ids(&keys);
        assert_eq!(ids, vec![0, 1, 2, 0, 1]);
        assert_eq!(distinct, vec![Some(i64::MAX), None, Some(-5)]);
        let narrow = Int64Array::from(vec![Some(7), None, Some(-5), Some(7), None]);
        let (ids, distinct) = group_ids(&narrow);
        assert_eq!(ids, vec![0, 1, 2, 0, 1]);
        assert_eq!(distinct, vec![Some(7), None, Some(-5)]);
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
}
