//! The CPU's grouped aggregation of a device batch ([`crate::ops::AggregateArgs`]): any
//! number of key columns, NULL a key value of its own, the aggregates read as the device
//! reads them (8-byte images, their 32-bit halves, floats). A single Int64 key over
//! Int64 / Float64 values, the shape of every host-edge call, takes the dense or hashed
//! single-key path of [`super::aggregate`]; every other shape numbers its groups by
//! arrow's row format.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float64Array, Int64Array, UInt32Array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow::row::{RowConverter, SortField};
use hashbrown::HashMap;
use oxidelake_core::EngineError;

use crate::ops::{AggFunc, AggInput, AggSpec, AggregateArgs, HostAggregateArgs, load_images};

/// Aggregates `batch` (the host form of `args.batch`) as `args` says.
pub(crate) fn aggregate(
    batch: &RecordBatch,
    args: &AggregateArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    let schema = args.result_schema();
    if let Some(specs) = single_int64_key(batch, args) {
        let out = super::aggregate::aggregate(HostAggregateArgs {
            batch,
            group_column: args.keys[0],
            aggregates: &specs,
        })?;
        return Ok(RecordBatch::try_new(schema, out.columns().to_vec())?);
    }
    let (group_of_row, first_rows) = number_groups(batch, args.keys)?;
    let groups = first_rows.len();
    let firsts = UInt32Array::from(first_rows);
    let mut columns = args
        .keys
        .iter()
        .map(|k| Ok(arrow::compute::take(batch.column(*k), &firsts, None)?))
        .collect::<Result<Vec<ArrayRef>, EngineError>>()?;
    for agg in args.aggregates {
        columns.push(accumulate(
            batch,
            agg.func,
            agg.input,
            &group_of_row,
            groups,
        )?);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(groups));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

/// The single-key path's aggregates, where `args` has that shape: one Int64 key, and
/// COUNT over a column's valid rows or SUM / MIN / MAX over an Int64 or Float64 column.
fn single_int64_key(batch: &RecordBatch, args: &AggregateArgs<'_>) -> Option<Vec<AggSpec>> {
    let [key] = args.keys else {
        return None;
    };
    let is = |c: usize, dt: &DataType| batch.column(c).data_type() == dt;
    if !is(*key, &DataType::Int64) {
        return None;
    }
    args.aggregates
        .iter()
        .map(|agg| {
            let column = match (agg.func, agg.input) {
                (AggFunc::Count, AggInput::Valid(c))
                    if is(c, &DataType::Int64) || is(c, &DataType::Float64) =>
                {
                    c
                }
                (_, AggInput::Int(c)) if is(c, &DataType::Int64) => c,
                (_, AggInput::Float(c)) if is(c, &DataType::Float64) => c,
                _ => return None,
            };
            (agg.func != AggFunc::Count || matches!(agg.input, AggInput::Valid(_))).then_some(
                AggSpec {
                    func: agg.func,
                    column,
                },
            )
        })
        .collect()
}

/// Each row's group and each group's first row, groups numbered in order of first
/// appearance (no keys: every row in one group).
fn number_groups(batch: &RecordBatch, keys: &[usize]) -> Result<(Vec<u32>, Vec<u32>), EngineError> {
    let rows = batch.num_rows();
    if keys.is_empty() {
        let firsts = if rows == 0 { Vec::new() } else { vec![0] };
        return Ok((vec![0; rows], firsts));
    }
    let converter = RowConverter::new(
        keys.iter()
            .map(|k| SortField::new(batch.column(*k).data_type().clone()))
            .collect(),
    )?;
    let key_columns: Vec<ArrayRef> = keys.iter().map(|k| Arc::clone(batch.column(*k))).collect();
    let encoded = converter.convert_columns(&key_columns)?;
    let mut ids = HashMap::with_capacity(rows.min(1 << 16));
    let (mut group_of_row, mut firsts) = (Vec::with_capacity(rows), Vec::new());
    for row in 0..rows {
        let next = firsts.len() as u32;
        let id = *ids.entry(encoded.row(row)).or_insert(next);
        if id == next {
            firsts.push(row as u32);
        }
        group_of_row.push(id);
    }
    Ok((group_of_row, firsts))
}

/// Flips the magnitude bits of negative values: an f64's bits ordered as
/// `f64::total_cmp` orders the floats (NaN above +inf, -0.0 below +0.0), and back.
fn total_order(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// One aggregate's column: Int64 for COUNT and integer inputs, Float64 for floats, NULL
/// where a group saw no value (never for COUNT).
fn accumulate(
    batch: &RecordBatch,
    func: AggFunc,
    input: AggInput,
    group_of_row: &[u32],
    groups: usize,
) -> Result<ArrayRef, EngineError> {
    let column = match input {
        AggInput::Rows => None,
        AggInput::Valid(c)
        | AggInput::Int(c)
        | AggInput::Float(c)
        | AggInput::Low32(c)
        | AggInput::High32(c) => Some(batch.column(c)),
    };
    let nulls = column.and_then(|c| c.logical_nulls());
    let valid = |row: usize| nulls.as_ref().is_none_or(|n| n.is_valid(row));
    let mut counts = vec![0i64; groups];
    for (row, g) in group_of_row.iter().enumerate() {
        if valid(row) {
            counts[*g as usize] += 1;
        }
    }
    if func == AggFunc::Count {
        return Ok(Arc::new(Int64Array::from(counts)));
    }
    let column = column.ok_or_else(|| EngineError::InvalidArgument {
        what: "device aggregate",
        detail: format!("{} over every row", func.name()),
    })?;
    let seen = NullBuffer::from_iter(counts.iter().map(|c| *c > 0));
    let images = load_images(column.as_ref())?;
    let fold = |init: i64, step: fn(i64, i64) -> i64, image: &dyn Fn(i64) -> i64| {
        let mut acc = vec![init; groups];
        for (row, g) in group_of_row.iter().enumerate() {
            if valid(row) {
                let a = &mut acc[*g as usize];
                *a = step(*a, image(images[row]));
            }
        }
        acc
    };
    let step: fn(i64, i64) -> i64 = match func {
        AggFunc::Sum => i64::wrapping_add,
        AggFunc::Min => i64::min,
        _ => i64::max,
    };
    let init = match func {
        AggFunc::Min => i64::MAX,
        AggFunc::Max => i64::MIN,
        _ => 0,
    };
    Ok(match input {
        AggInput::Float(_) if func == AggFunc::Sum => {
            let mut acc = vec![0.0f64; groups];
            for (row, g) in group_of_row.iter().enumerate() {
                if valid(row) {
                    acc[*g as usize] += f64::from_bits(images[row] as u64);
                }
            }
            Arc::new(Float64Array::new(acc.into(), Some(seen)))
        }
        AggInput::Float(_) => {
            let ordered = fold(init, step, &total_order);
            let values: Vec<f64> = ordered
                .iter()
                .map(|k| f64::from_bits(total_order(*k) as u64))
                .collect();
            Arc::new(Float64Array::new(values.into(), Some(seen)))
        }
        AggInput::Low32(_) => Arc::new(Int64Array::new(
            fold(init, step, &|v| i64::from(v as u32)).into(),
            Some(seen),
        )),
        AggInput::High32(_) => Arc::new(Int64Array::new(
            fold(init, step, &|v| v >> 32).into(),
            Some(seen),
        )),
        _ => Arc::new(Int64Array::new(fold(init, step, &|v| v).into(), Some(seen))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Agg;
    use arrow::array::{AsArray, StringArray};
    use arrow::datatypes::Int64Type;

    fn batch() -> RecordBatch {
        let s = StringArray::from(vec![Some("x"), None, Some("x"), Some("y"), None]);
        let k = Int64Array::from(vec![Some(1), Some(1), Some(1), None, None]);
        let v = Int64Array::from(vec![Some(5), Some(-3), None, Some(i64::MAX), Some(4)]);
        let f = Float64Array::from(vec![Some(0.0), Some(-0.0), Some(f64::NAN), Some(1.5), None]);
        RecordBatch::try_from_iter(vec![
            ("s", Arc::new(s) as ArrayRef),
            ("k", Arc::new(k) as ArrayRef),
            ("v", Arc::new(v) as ArrayRef),
            ("f", Arc::new(f) as ArrayRef),
        ])
        .unwrap()
    }

    fn run(keys: &[usize], aggregates: &[Agg]) -> RecordBatch {
        let host = batch();
        let device = crate::DeviceBatch::host(host.clone());
        aggregate(
            &host,
            &AggregateArgs {
                batch: &device,
                keys,
                aggregates,
            },
        )
        .unwrap()
    }

    #[test]
    fn two_keys_with_nulls_group_as_values_and_every_aggregate_reads_as_the_device_does() {
        let agg = |func, input| Agg { func, input };
        let out = run(
            &[0, 1],
            &[
                agg(AggFunc::Count, AggInput::Rows),
                agg(AggFunc::Sum, AggInput::Int(2)),
                agg(AggFunc::Max, AggInput::Float(3)),
                agg(AggFunc::Sum, AggInput::High32(2)),
            ],
        );
        // Groups in order of first appearance: (x,1), (NULL,1), (y,NULL), (NULL,NULL).
        assert_eq!(out.num_rows(), 4);
        let count = out.column(2).as_primitive::<Int64Type>();
        assert_eq!(count.values().to_vec(), vec![2, 1, 1, 1]);
        let sum = out.column(3).as_primitive::<Int64Type>();
        assert_eq!(sum.value(0), 5, "NULL values are skipped");
        assert_eq!(sum.value(2), i64::MAX);
        let max = out
            .column(4)
            .as_primitive::<arrow::datatypes::Float64Type>();
        assert!(max.value(0).is_nan(), "NaN is the largest float");
        assert!(out.column(4).is_null(3), "a group without values is NULL");
        let high = out.column(5).as_primitive::<Int64Type>();
        assert_eq!(
            high.value(2),
            i64::MAX >> 32,
            "the high half, sign-extended"
        );
    }

    #[test]
    fn a_single_int64_key_takes_the_single_key_path_with_the_same_layout() {
        let agg = |func, input| Agg { func, input };
        let aggs = [
            agg(AggFunc::Count, AggInput::Valid(2)),
            agg(AggFunc::Min, AggInput::Int(2)),
            agg(AggFunc::Min, AggInput::Float(3)),
        ];
        let host = batch();
        let device = crate::DeviceBatch::host(host.clone());
        let args = AggregateArgs {
            batch: &device,
            keys: &[1],
            aggregates: &aggs,
        };
        assert!(single_int64_key(&host, &args).is_some());
        let out = run(&[1], &aggs);
        assert_eq!(out.schema().field(1).name(), "a0");
        let min = out
            .column(3)
            .as_primitive::<arrow::datatypes::Float64Type>();
        assert_eq!(
            min.value(0).to_bits(),
            (-0.0f64).to_bits(),
            "-0.0 is below +0.0"
        );
        assert_eq!(out.column(1).as_primitive::<Int64Type>().value(0), 2);
    }
}
