//! Join keys of several columns (or one string column) as one Int64, digit by digit.
//!
//! Each key column becomes a digit with a span learnt from the build side:
//! - integer-like columns (those `widens_exactly` admits): the value minus the build side's
//!   minimum, span max − min + 1;
//! - strings: the build side's distinct values numbered in order of appearance, span
//!   their count;
//! - booleans: 0 or 1, span 2.
//!
//! The key is Σ digitᵢ · strideᵢ with stride₀ = 1 and strideᵢ₊₁ = strideᵢ · spanᵢ, a
//! mixed-radix number: one-to-one as long as the product of the spans fits in i64, which
//! the build checks (otherwise the caller falls back to numbering the row format). A
//! probe value outside its digit's span (an integer outside the build range, a string
//! the build side lacks) cannot equal any build key, so its row gets a NULL key and never
//! matches, as does a row with a NULL in any key column.
//!
//! Against numbering Arrow's row format this costs one subtraction per integer column
//! and one lookup per string column (`strings`: short strings packed, no hashing for
//! the first few distinct values), instead of encoding every row and
//! hashing and comparing the encodings; TPC-H's two-integer keys need no hashing at all.

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use datafusion::error::Result;

use oxidelake_device::ops::{RadixDigit, widened_to_int64, widens_exactly};
use oxidelake_device::strings::{StringNumbers, for_each_string};

/// The digits of a build side's key columns.
#[derive(Debug)]
pub(crate) struct RadixKeys {
    digits: Vec<Digit>,
}

#[derive(Debug)]
struct Digit {
    values: DigitValues,
    stride: i64,
}

#[derive(Debug)]
enum DigitValues {
    /// Widened integers in `min .. min + span`.
    Int { min: i64, span: u64 },
    /// Strings numbered in build order.
    Text(StringNumbers<Box<[u8]>>),
    /// false 0, true 1.
    Bool,
}

impl DigitValues {
    fn span(&self) -> u64 {
        match self {
            DigitValues::Int { span, .. } => *span,
            DigitValues::Text(numbers) => numbers.len().max(1) as u64,
            DigitValues::Bool => 2,
        }
    }
}

/// Whether a column of `dt` can be a digit.
fn radix_type(dt: &DataType) -> bool {
    widens_exactly(dt)
        || matches!(
            dt,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
        )
}

/// The rows where every key column is valid (`None`: all of them).
pub(super) fn all_valid(columns: &[ArrayRef]) -> Option<NullBuffer> {
    columns.iter().fold(None, |acc, c| {
        NullBuffer::union(acc.as_ref(), c.logical_nulls().as_ref())
    })
}

impl RadixKeys {
    /// The digits of the build key `columns` and the build side's keys, or `None` when a
    /// column cannot be a digit or the spans' product does not fit in i64.
    pub(crate) fn build(columns: &[ArrayRef]) -> Result<Option<(Self, Int64Array)>> {
        if !columns.iter().all(|c| radix_type(c.data_type())) {
            return Ok(None);
        }
        let rows = columns.first().map_or(0, |c| c.len());
        let mut keys = vec![0i64; rows];
        let mut digits = Vec::with_capacity(columns.len());
        let mut stride: i64 = 1;
        for column in columns {
            let values = match column.data_type() {
                DataType::Boolean => DigitValues::Bool,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                    let mut numbers = StringNumbers::default();
                    for_each_string(column, |_, key| {
                        numbers.number(key);
                    })?;
                    DigitValues::Text(numbers)
                }
                _ => {
                    let ints = widened_to_int64(column.as_ref())?;
                    let (min, max) = (arrow::compute::min(&ints), arrow::compute::max(&ints));
                    let (min, max) = (min.unwrap_or(0), max.unwrap_or(0));
                    DigitValues::Int {
                        min,
                        span: max.abs_diff(min).saturating_add(1),
                    }
                }
            };
            // The keys so far stay below `stride`; with this digit below `next`.
            let next = i64::try_from(values.span())
                .ok()
                .and_then(|span| stride.checked_mul(span));
            let Some(next) = next else {
                return Ok(None);
            };
            let digit = Digit { values, stride };
            digit.add_to(column, &mut keys, &mut vec![true; rows])?;
            digits.push(digit);
            stride = next;
        }
        let keys = Int64Array::new(ScalarBuffer::from(keys), all_valid(columns));
        Ok(Some((Self { digits }, keys)))
    }

    /// The digits over key `columns` when every key column is an integer-like one: what
    /// a device computes the same keys from (`join_radix_keys`).
    pub(crate) fn int_digits(&self, columns: &[usize]) -> Option<Vec<RadixDigit>> {
        (self.digits.iter().zip(columns))
            .map(|(d, column)| match d.values {
                DigitValues::Int { min, span } => Some(RadixDigit {
                    column: *column,
                    min,
                    span,
                    stride: d.stride,
                }),
                _ => None,
            })
            .collect()
    }

    /// The keys of a probe side's key `columns`: NULL where a column is NULL or a value
    /// lies outside its digit (no build key can equal it).
    pub(crate) fn probe(&self, columns: &[ArrayRef]) -> Result<Int64Array> {
        let rows = columns.first().map_or(0, |c| c.len());
        let mut keys = vec![0i64; rows];
        let mut found = vec![true; rows];
        for (digit, column) in self.digits.iter().zip(columns) {
            digit.add_to(column, &mut keys, &mut found)?;
        }
        let found = NullBuffer::from(found);
        let valid = NullBuffer::union(all_valid(columns).as_ref(), Some(&found));
        Ok(Int64Array::new(ScalarBuffer::from(keys), valid))
    }
}

impl Digit {
    /// Adds this digit of `column` times its stride to `keys`; clears `found` where the
    /// value lies outside the digit. NULL rows are left to the caller's validity.
    fn add_to(&self, column: &ArrayRef, keys: &mut [i64], found: &mut [bool]) -> Result<()> {
        let stride = self.stride;
        match &self.values {
            DigitValues::Int { min, span } => {
                let ints = widened_to_int64(column.as_ref())?;
                for (row, v) in ints.values().iter().enumerate() {
                    // Below `min` wraps to an offset far past the span.
                    let offset = v.wrapping_sub(*min) as u64;
                    if offset < *span {
                        keys[row] += offset as i64 * stride;
                    } else if ints.is_valid(row) {
                        found[row] = false;
                    }
                }
            }
            // NULL strings are skipped: left to the validity, their digit stays 0.
            DigitValues::Text(numbers) => {
                for_each_string(column, |row, key| match numbers.get(key) {
                    Some(number) => keys[row] += number * stride,
                    None => found[row] = false,
                })?
            }
            DigitValues::Bool => {
                let bools = column.as_boolean();
                for (row, key) in keys.iter_mut().enumerate() {
                    if bools.value(row) {
                        *key += stride;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Int32Array, StringViewArray};

    use super::*;

    fn columns(
        ints: Vec<Option<i32>>,
        texts: Vec<Option<&str>>,
        flags: Vec<bool>,
    ) -> Vec<ArrayRef> {
        vec![
            Arc::new(Int32Array::from(ints)),
            Arc::new(StringViewArray::from(texts)),
            Arc::new(BooleanArray::from(flags)),
        ]
    }

    #[test]
    fn equal_keys_get_one_number_and_unknown_or_null_keys_none() {
        let build = columns(
            vec![Some(5), Some(7), Some(5), None],
            vec![Some("a"), Some("b"), Some("b"), Some("a")],
            vec![true, false, true, true],
        );
        let (radix, keys) = RadixKeys::build(&build).unwrap().unwrap();
        // Three distinct keys, the NULL row has none.
        let build_keys: Vec<Option<i64>> = keys.iter().collect();
        assert!(build_keys[3].is_none());
        let distinct: std::collections::HashSet<i64> =
            build_keys.iter().flatten().copied().collect();
        assert_eq!(distinct.len(), 3);
        let probe = columns(
            vec![
                Some(7),
                Some(5),
                Some(5),
                Some(6),
                Some(9),
                Some(5),
                Some(4),
            ],
            vec![
                Some("b"),
                Some("b"),
                Some("a"),
                Some("a"),
                Some("a"),
                None,
                Some("a"),
            ],
            vec![false, true, false, true, true, true, true],
        );
        let probed: Vec<Option<i64>> = radix.probe(&probe).unwrap().iter().collect();
        assert_eq!(probed[0], build_keys[1]); // (7, b, false)
        assert_eq!(probed[1], build_keys[2]); // (5, b, true)
        // (5, a, false): every digit known, but no build row has the combination.
        assert!(probed[2].is_some() && !distinct.contains(&probed[2].unwrap()));
        // 6 lies inside the build range but is not a build value: a number no build key has.
        assert!(probed[3].is_some() && !distinct.contains(&probed[3].unwrap()));
        // Outside the build range (above and below), and a NULL string: no key.
        assert_eq!((probed[4], probed[5], probed[6]), (None, None, None));
    }

    #[test]
    fn spans_whose_product_overflows_are_refused() {
        let wide: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, i64::MAX]));
        assert!(
            RadixKeys::build(&[Arc::clone(&wide), wide])
                .unwrap()
                .is_none()
        );
        let floats: ArrayRef = Arc::new(arrow::array::Float64Array::from(vec![1.0]));
        assert!(RadixKeys::build(&[floats]).unwrap().is_none());
    }
}
