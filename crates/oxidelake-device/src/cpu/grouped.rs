//! The CPU's grouped aggregation of a device batch ([`crate::ops::AggregateArgs`]): any
//! number of key columns, NULL a key value of its own, the aggregates read as the device
//! reads them (8-byte images, their 32-bit halves, floats).
//!
//! Groups are numbered in order of first appearance: digit by digit where every key is
//! a string, a boolean or integer-like (`digits`, one table lookup per row), through
//! arrow's row format otherwise (floats, wide decimals, nested keys). Each aggregate is
//! then one pass over its column into a dense accumulator per group. A column's images
//! are read once however many aggregates read it (an Int64 or Float64 column's buffer is
//! used as it is), each validity's counts once, and a SUM by halves of one column (how
//! every integer and decimal sum arrives) adds both halves in one pass.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, UInt32Array};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow::row::{RowConverter, SortField};
use hashbrown::HashMap;
use oxidelake_core::EngineError;

use super::digits;
use crate::ops::{Agg, AggFunc, AggInput, AggregateArgs, load_images};

/// Aggregates `batch` (the host form of `args.batch`) as `args` says.
pub(crate) fn aggregate(
    batch: &RecordBatch,
    args: &AggregateArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    // The halves' sums and the group numbers hold for fewer rows.
    if batch.num_rows() > i32::MAX as usize {
        return Err(EngineError::unsupported(
            "grouped aggregate",
            format!("a batch of {} rows (2^31 at most)", batch.num_rows()),
        ));
    }
    let schema = args.result_schema();
    let keys: Vec<ArrayRef> = args
        .keys
        .iter()
        .map(|k| Arc::clone(batch.column(*k)))
        .collect();
    let (group_of_row, first_rows) = number_groups(&keys, batch.num_rows())?;
    let groups = first_rows.len();
    let firsts = UInt32Array::from(first_rows);
    let mut columns = keys
        .iter()
        .map(|k| Ok(arrow::compute::take(k, &firsts, None)?))
        .collect::<Result<Vec<ArrayRef>, EngineError>>()?;
    let mut inputs = Inputs {
        batch,
        group_of_row: &group_of_row,
        groups,
        images: vec![None; batch.num_columns()],
        counts: HashMap::new(),
    };
    columns.extend(inputs.results(args.aggregates)?);
    let options = RecordBatchOptions::new().with_row_count(Some(groups));
    Ok(RecordBatch::try_new_with_options(
        schema, columns, &options,
    )?)
}

/// Each row's group and each group's first row, groups numbered in order of first
/// appearance (no keys: every row in one group).
fn number_groups(keys: &[ArrayRef], rows: usize) -> Result<digits::Numbered, EngineError> {
    if keys.is_empty() {
        let firsts = if rows == 0 { Vec::new() } else { vec![0] };
        return Ok((vec![0; rows], firsts));
    }
    if keys.iter().all(|k| digits::digit_type(k.data_type()))
        && let Some(numbered) = digits::number_groups(keys)?
    {
        return Ok(numbered);
    }
    let converter = RowConverter::new(
        keys.iter()
            .map(|k| SortField::new(k.data_type().clone()))
            .collect(),
    )?;
    let encoded = converter.convert_columns(keys)?;
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

/// What the aggregates of one batch read, each part made once.
struct Inputs<'a> {
    batch: &'a RecordBatch,
    group_of_row: &'a [u32],
    groups: usize,
    /// Each column's 8-byte images, once read.
    images: Vec<Option<ScalarBuffer<i64>>>,
    /// Each group's count of valid rows, by column (`None`: every row, which is also
    /// the count of a column without NULLs).
    counts: HashMap<Option<usize>, Arc<Vec<i64>>>,
}

impl Inputs<'_> {
    /// One result column per aggregate, in order.
    fn results(&mut self, aggregates: &[Agg]) -> Result<Vec<ArrayRef>, EngineError> {
        let mut out: Vec<Option<ArrayRef>> = vec![None; aggregates.len()];
        for (i, agg) in aggregates.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            // A SUM by halves: both halves in one pass, whichever comes first.
            let partner = match agg.input {
                AggInput::Low32(c) => Some((c, AggInput::High32(c))),
                AggInput::High32(c) => Some((c, AggInput::Low32(c))),
                _ => None,
            };
            if let (AggFunc::Sum, Some((c, input))) = (agg.func, partner) {
                let other = Agg {
                    func: AggFunc::Sum,
                    input,
                };
                if let Some(j) = aggregates.iter().position(|a| *a == other) {
                    let (low_sums, high_sums) = self.sum_halves(c)?;
                    let (low, high) = match agg.input {
                        AggInput::Low32(_) => (i, j),
                        _ => (j, i),
                    };
                    out[low] = Some(low_sums);
                    out[high] = Some(high_sums);
                    continue;
                }
            }
            out[i] = Some(self.accumulate(*agg)?);
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn column(&self, c: usize) -> Result<&ArrayRef, EngineError> {
        self.batch
            .columns()
            .get(c)
            .ok_or_else(|| EngineError::InvalidArgument {
                what: "aggregate column",
                detail: format!("index {c} out of {} columns", self.batch.num_columns()),
            })
    }

    /// The NULLs of column `c`, where it has any.
    fn nulls(&self, c: usize) -> Result<Option<NullBuffer>, EngineError> {
        Ok(self
            .column(c)?
            .logical_nulls()
            .filter(|n| n.null_count() > 0))
    }

    /// Column `c`'s images: an Int64 or Float64 buffer as it is, other types read once.
    fn images(&mut self, c: usize) -> Result<ScalarBuffer<i64>, EngineError> {
        if let Some(images) = &self.images[c] {
            return Ok(images.clone());
        }
        let column = self.column(c)?;
        let images = match column.data_type() {
            DataType::Int64 => column.as_primitive::<Int64Type>().values().clone(),
            // The same 8 bytes per row, read as integers: the buffer is shared, not copied.
            DataType::Float64 => {
                let floats = column.as_primitive::<Float64Type>();
                floats.values().inner().clone().into()
            }
            _ => ScalarBuffer::from(load_images(column.as_ref())?),
        };
        self.images[c] = Some(images.clone());
        Ok(images)
    }

    /// Each group's count of `c`'s valid rows (`None`: of every row).
    fn counts(&mut self, c: Option<usize>) -> Result<Arc<Vec<i64>>, EngineError> {
        let nulls = match c {
            Some(c) => self.nulls(c)?,
            None => None,
        };
        let key = nulls.as_ref().and(c);
        if let Some(counts) = self.counts.get(&key) {
            return Ok(Arc::clone(counts));
        }
        let mut counts = vec![0i64; self.groups];
        match &nulls {
            None => self
                .group_of_row
                .iter()
                .for_each(|g| counts[*g as usize] += 1),
            Some(n) => n
                .valid_indices()
                .for_each(|row| counts[self.group_of_row[row] as usize] += 1),
        }
        let counts = Arc::new(counts);
        self.counts.insert(key, Arc::clone(&counts));
        Ok(counts)
    }

    /// The groups that saw a valid value of column `c`.
    fn seen(&mut self, c: usize) -> Result<NullBuffer, EngineError> {
        let counts = self.counts(Some(c))?;
        Ok(NullBuffer::from_iter(counts.iter().map(|n| *n > 0)))
    }

    /// Folds `step(accumulator, image)` over column `c`'s valid rows, per group.
    fn fold<T: Copy>(
        &mut self,
        c: usize,
        init: T,
        mut step: impl FnMut(&mut T, i64),
    ) -> Result<Vec<T>, EngineError> {
        let images = self.images(c)?;
        let mut acc = vec![init; self.groups];
        match self.nulls(c)? {
            None => {
                for (g, v) in self.group_of_row.iter().zip(images.iter()) {
                    step(&mut acc[*g as usize], *v);
                }
            }
            Some(n) => {
                for row in n.valid_indices() {
                    step(&mut acc[self.group_of_row[row] as usize], images[row]);
                }
            }
        }
        Ok(acc)
    }

    /// SUM of the low and of the high 32-bit halves of column `c`'s images, in one pass.
    fn sum_halves(&mut self, c: usize) -> Result<(ArrayRef, ArrayRef), EngineError> {
        let sums = self.fold(c, (0i64, 0i64), |(low, high), v| {
            *low += i64::from(v as u32);
            *high += v >> 32;
        })?;
        let seen = self.seen(c)?;
        let (low, high): (Vec<i64>, Vec<i64>) = sums.into_iter().unzip();
        Ok((
            Arc::new(Int64Array::new(low.into(), Some(seen.clone()))),
            Arc::new(Int64Array::new(high.into(), Some(seen))),
        ))
    }

    /// One aggregate's column: Int64 for COUNT and integer inputs, Float64 for floats,
    /// NULL where a group saw no value (never for COUNT).
    fn accumulate(&mut self, agg: Agg) -> Result<ArrayRef, EngineError> {
        let c = agg.input.column();
        if agg.func == AggFunc::Count {
            let counts = self.counts(c)?;
            return Ok(Arc::new(Int64Array::from(counts.as_ref().clone())));
        }
        let c = c.ok_or_else(|| EngineError::InvalidArgument {
            what: "device aggregate",
            detail: format!("{} over every row", agg.func.name()),
        })?;
        let ints = |values: Vec<i64>, seen| -> ArrayRef {
            Arc::new(Int64Array::new(values.into(), Some(seen)))
        };
        let floats = |values: Vec<f64>, seen| -> ArrayRef {
            Arc::new(Float64Array::new(values.into(), Some(seen)))
        };
        let values = match (agg.func, agg.input) {
            (AggFunc::Sum, AggInput::Float(_)) => {
                let sums = self.fold(c, 0.0f64, |a, v| *a += f64::from_bits(v as u64))?;
                return Ok(floats(sums, self.seen(c)?));
            }
            (AggFunc::Min | AggFunc::Max, AggInput::Float(_)) => {
                let ordered = if agg.func == AggFunc::Min {
                    self.fold(c, i64::MAX, |a, v| *a = (*a).min(total_order(v)))?
                } else {
                    self.fold(c, i64::MIN, |a, v| *a = (*a).max(total_order(v)))?
                };
                let values = ordered
                    .iter()
                    .map(|k| f64::from_bits(total_order(*k) as u64))
                    .collect();
                return Ok(floats(values, self.seen(c)?));
            }
            (AggFunc::Sum, AggInput::Low32(_)) => {
                self.fold(c, 0i64, |a, v| *a += i64::from(v as u32))?
            }
            (AggFunc::Sum, AggInput::High32(_)) => self.fold(c, 0i64, |a, v| *a += v >> 32)?,
            (AggFunc::Sum, _) => self.fold(c, 0i64, |a, v| *a = a.wrapping_add(v))?,
            (AggFunc::Min, _) => self.fold(c, i64::MAX, |a, v| *a = (*a).min(v))?,
            _ => self.fold(c, i64::MIN, |a, v| *a = (*a).max(v))?,
        };
        Ok(ints(values, self.seen(c)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;

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

    fn agg(func: AggFunc, input: AggInput) -> Agg {
        Agg { func, input }
    }

    #[test]
    fn two_keys_with_nulls_group_as_values_and_every_aggregate_reads_as_the_device_does() {
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
        let max = out.column(4).as_primitive::<Float64Type>();
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
    fn a_sum_by_halves_in_one_pass_equals_each_half_summed_alone() {
        let low = agg(AggFunc::Sum, AggInput::Low32(2));
        let high = agg(AggFunc::Sum, AggInput::High32(2));
        let both = run(&[1], &[high, low]);
        let alone = run(&[1], &[high]);
        let alone_low = run(&[1], &[low]);
        assert_eq!(both.column(1), alone.column(1), "the high half");
        assert_eq!(both.column(2), alone_low.column(1), "the low half");
        let low_sums = both.column(2).as_primitive::<Int64Type>();
        // Group k=1 holds 5 and -3: low halves 5 and 2^32 - 3.
        assert_eq!(low_sums.value(0), 5 + (1i64 << 32) - 3);
        // The NULL key's group holds i64::MAX and 4: the halves join to their exact sum.
        let high_sums = both.column(1).as_primitive::<Int64Type>();
        let joined = (i128::from(high_sums.value(1)) << 32) + i128::from(low_sums.value(1));
        assert_eq!(joined, i128::from(i64::MAX) + 4);
    }

    #[test]
    fn a_single_integer_key_numbers_its_groups_by_digits_with_min_over_floats_in_total_order() {
        let out = run(
            &[1],
            &[
                agg(AggFunc::Count, AggInput::Valid(2)),
                agg(AggFunc::Min, AggInput::Int(2)),
                agg(AggFunc::Min, AggInput::Float(3)),
            ],
        );
        assert_eq!(out.schema().field(1).name(), "a0");
        let min = out.column(3).as_primitive::<Float64Type>();
        assert_eq!(
            min.value(0).to_bits(),
            (-0.0f64).to_bits(),
            "-0.0 is below +0.0"
        );
        assert_eq!(out.column(1).as_primitive::<Int64Type>().value(0), 2);
        assert!(out.column(0).is_null(1), "the NULL key is a group");
    }

    #[test]
    fn float_keys_group_through_the_row_format() {
        let out = run(&[3], &[agg(AggFunc::Count, AggInput::Rows)]);
        // 0.0, -0.0, NaN, 1.5, NULL: the device groups by the images, so five groups.
        assert_eq!(out.num_rows(), 5);
    }
}
