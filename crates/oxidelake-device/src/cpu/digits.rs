//! Numbering a batch's group keys digit by digit, without Arrow's row format.
//!
//! Each key column becomes a digit: NULL is 0; an integer-like value (its 8-byte image)
//! is 1 + its offset from the batch's minimum; a string is 1 + its number in the batch's
//! own dictionary (order of appearance, [`crate::strings`]); a boolean is 1 or 2. The
//! row's key is the mixed-radix number Σ digitᵢ · strideᵢ, one-to-one while the product
//! of the spans fits in i64 (otherwise the caller numbers the row format). The keys are
//! then numbered 0, 1, 2, … in order of first appearance, through a direct table when
//! their range is narrow and a hash map otherwise, which is what the row-format path
//! returns too: one lookup per string column instead of encoding, hashing and comparing
//! every row's bytes. Digits are added into the keys as they are read, without a column
//! of digits per key.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use hashbrown::HashMap;
use oxidelake_core::EngineError;

use crate::ops::load_images;
use crate::predicate::{ValueClass, value_class};
use crate::strings::{StringNumbers, for_each_string};

/// Whether a key column of `dt` can be a digit: strings, booleans, and the integer-like
/// types whose 8-byte images are one-to-one (past 18 digits a decimal's image is not).
pub(super) fn digit_type(dt: &DataType) -> bool {
    match dt {
        DataType::Decimal128(precision, _) => *precision <= 18,
        DataType::Dictionary(_, _) => false,
        _ => matches!(value_class(dt), Some(ValueClass::Int | ValueClass::Str)),
    }
}

/// Each row's group and each group's first row, groups numbered 0, 1, 2, … in order of
/// first appearance.
pub(super) type Numbered = (Vec<u32>, Vec<u32>);

/// Key ranges up to this (or 4 per row) are numbered through a direct table.
const DIRECT_SPAN: i64 = 1 << 16;

/// The group number of every row and the first row of every group, or `None` when the
/// spans' product does not fit in i64.
pub(super) fn number_groups(columns: &[ArrayRef]) -> Result<Option<Numbered>, EngineError> {
    let rows = columns.first().map_or(0, |c| c.len());
    let mut keys = vec![0i64; rows];
    let mut stride: i64 = 1;
    for column in columns {
        // Every key so far is below `stride`; with this digit, below `stride · span`.
        let Some(span) = add_digits(column, stride, &mut keys)? else {
            return Ok(None);
        };
        let Some(next) = stride.checked_mul(span) else {
            return Ok(None);
        };
        stride = next;
    }
    Ok(Some(first_seen(&keys, stride)))
}

/// Adds `column`'s digit of every row times `stride` to `keys` and returns the digit's
/// span (NULL is 0), or `None` when the span does not fit in i64. The additions wrap:
/// when the spans' product overflows, the caller discards the keys.
fn add_digits(
    column: &ArrayRef,
    stride: i64,
    keys: &mut [i64],
) -> Result<Option<i64>, EngineError> {
    let nulls = column.logical_nulls().filter(|n| n.null_count() > 0);
    Ok(Some(match column.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let mut numbers: StringNumbers<&[u8]> = StringNumbers::default();
            for_each_string(column, |row, key| {
                let digit = numbers.number(key) + 1;
                keys[row] = keys[row].wrapping_add(digit.wrapping_mul(stride));
            })?;
            numbers.len() + 1
        }
        DataType::Boolean => {
            let bools = column.as_boolean();
            for (row, key) in keys.iter_mut().enumerate() {
                if nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
                    let digit = 1 + i64::from(bools.value(row));
                    *key = key.wrapping_add(digit.wrapping_mul(stride));
                }
            }
            3
        }
        _ => {
            let images = load_images(column.as_ref())?;
            let values = images.as_slice();
            let (min, max) = match &nulls {
                None => values
                    .iter()
                    .fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v))),
                Some(n) => n
                    .valid_indices()
                    .fold((i64::MAX, i64::MIN), |(lo, hi), row| {
                        (lo.min(values[row]), hi.max(values[row]))
                    }),
            };
            if min > max {
                // Only NULLs: every digit is 0.
                return Ok(Some(1));
            }
            let Some(span) = max.checked_sub(min).and_then(|d| d.checked_add(2)) else {
                return Ok(None);
            };
            // The digit is v − min + 1; a NULL slot's value is arbitrary and is masked.
            let base = 1i64.wrapping_sub(min);
            match &nulls {
                None => {
                    for (key, v) in keys.iter_mut().zip(values.iter()) {
                        *key = key.wrapping_add(v.wrapping_add(base).wrapping_mul(stride));
                    }
                }
                Some(n) => {
                    for row in n.valid_indices() {
                        let digit = values[row].wrapping_add(base);
                        keys[row] = keys[row].wrapping_add(digit.wrapping_mul(stride));
                    }
                }
            }
            span
        }
    }))
}

/// Numbers `keys` (each below `range`) 0, 1, 2, … in order of first appearance: each
/// row's group and each group's first row.
fn first_seen(keys: &[i64], range: i64) -> Numbered {
    let mut ids = Vec::with_capacity(keys.len());
    let mut first_rows = Vec::new();
    if range <= DIRECT_SPAN.max(4 * keys.len() as i64) {
        let mut table = vec![u32::MAX; range as usize];
        for (row, key) in keys.iter().enumerate() {
            let slot = &mut table[*key as usize];
            if *slot == u32::MAX {
                *slot = first_rows.len() as u32;
                first_rows.push(row as u32);
            }
            ids.push(*slot);
        }
    } else {
        let mut table: HashMap<i64, u32> = HashMap::default();
        for (row, key) in keys.iter().enumerate() {
            let id = *table.entry(*key).or_insert_with(|| {
                first_rows.push(row as u32);
                first_rows.len() as u32 - 1
            });
            ids.push(id);
        }
    }
    (ids, first_rows)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Date32Array, StringArray};

    use super::*;

    #[test]
    fn keys_with_nulls_strings_dates_and_booleans_are_numbered_in_first_seen_order() {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![
                Some("R"),
                None,
                Some("R"),
                Some("A"),
                None,
            ])),
            Arc::new(Date32Array::from(vec![
                Some(9),
                Some(9),
                Some(9),
                None,
                Some(9),
            ])),
            Arc::new(BooleanArray::from(vec![
                Some(true),
                None,
                Some(true),
                Some(false),
                None,
            ])),
        ];
        let (ids, first_rows) = number_groups(&columns).unwrap().unwrap();
        assert_eq!(ids, vec![0, 1, 0, 2, 1]);
        assert_eq!(first_rows, vec![0, 1, 3]);
    }

    #[test]
    fn spans_whose_product_overflows_fall_back_to_the_row_format() {
        let wide: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![i64::MIN, i64::MAX]));
        assert!(number_groups(&[wide]).unwrap().is_none());
        // Each span fits, their product does not: refused before any digit is added.
        let wide: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![0, 1 << 62, 5]));
        let names: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        assert!(number_groups(&[wide, names]).unwrap().is_none());
    }
}
