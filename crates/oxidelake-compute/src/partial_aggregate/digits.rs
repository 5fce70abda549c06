//! Numbering a batch's group keys digit by digit, without Arrow's row format.
//!
//! Each key column becomes a digit: NULL is 0; an integer-like value (see the join's
//! `widened`) is 1 + its offset from the batch's minimum; a string is 1 + its number in
//! the batch's own dictionary (order of appearance); a boolean is 1 or 2. The row's key
//! is the mixed-radix number Σ digitᵢ · strideᵢ, one-to-one while the product of the
//! spans fits in i64 (otherwise the caller numbers the row format). The keys are then
//! numbered 0, 1, 2, … in order of first appearance, through a direct table when their
//! range is narrow and a hash map otherwise, which is what the row-format path returns
//! too: one hash lookup per string column instead of encoding, hashing and comparing
//! every row's bytes.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use datafusion::common::HashMap;
use datafusion::error::Result;

use crate::hash_join::{for_each_bytes, radix_type, widened};

/// Whether every key column can be a digit (the join's digit types).
pub(super) fn digit_types(types: &[DataType]) -> bool {
    types.iter().all(radix_type)
}

/// Key ranges up to this (or 4 per row) are numbered through a direct table.
const DIRECT_SPAN: i64 = 1 << 16;

/// The group number of every row and the first row of every group, or `None` when the
/// spans' product does not fit in i64.
pub(super) fn number_groups(columns: &[ArrayRef]) -> Result<Option<(Vec<i64>, Vec<u32>)>> {
    let rows = columns.first().map_or(0, |c| c.len());
    let mut keys = vec![0i64; rows];
    let mut stride: i64 = 1;
    for column in columns {
        let Some((digits, span)) = digits_of(column, rows)? else {
            return Ok(None);
        };
        // Every key so far is below `stride`; with this digit, below `next`.
        let Some(next) = stride.checked_mul(span) else {
            return Ok(None);
        };
        for (key, digit) in keys.iter_mut().zip(&digits) {
            *key += digit * stride;
        }
        stride = next;
    }
    Ok(Some(first_seen(&keys, stride)))
}

/// The digit of every row of `column` and their span (NULL is 0), or `None` when the
/// span does not fit in i64.
fn digits_of(column: &ArrayRef, rows: usize) -> Result<Option<(Vec<i64>, i64)>> {
    Ok(Some(match column.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let mut numbers: HashMap<&[u8], i64> = HashMap::default();
            let mut digits = vec![0i64; rows];
            for_each_bytes(column, |row, bytes| {
                let next = numbers.len() as i64 + 1;
                digits[row] = *numbers.entry(bytes).or_insert(next);
            })?;
            (digits, numbers.len() as i64 + 1)
        }
        DataType::Boolean => {
            let bools = column.as_boolean();
            let digits = (0..rows)
                .map(|row| match bools.is_valid(row) {
                    false => 0,
                    true => 1 + i64::from(bools.value(row)),
                })
                .collect();
            (digits, 3)
        }
        _ => {
            let ints = widened(column)?;
            let (Some(min), Some(max)) = (arrow::compute::min(&ints), arrow::compute::max(&ints))
            else {
                // Only NULLs: every digit is 0.
                return Ok(Some((vec![0; rows], 1)));
            };
            let Some(span) = max.checked_sub(min).and_then(|d| d.checked_add(2)) else {
                return Ok(None);
            };
            let digits = ints
                .values()
                .iter()
                .enumerate()
                .map(|(row, v)| if ints.is_valid(row) { v - min + 1 } else { 0 })
                .collect();
            (digits, span)
        }
    }))
}

/// Numbers `keys` (each below `range`) 0, 1, 2, … in order of first appearance.
fn first_seen(keys: &[i64], range: i64) -> (Vec<i64>, Vec<u32>) {
    let mut ids = Vec::with_capacity(keys.len());
    let mut first_rows = Vec::new();
    if range <= DIRECT_SPAN.max(4 * keys.len() as i64) {
        let mut table = vec![-1i64; range as usize];
        for (row, key) in keys.iter().enumerate() {
            let slot = &mut table[*key as usize];
            if *slot < 0 {
                *slot = first_rows.len() as i64;
                first_rows.push(row as u32);
            }
            ids.push(*slot);
        }
    } else {
        let mut table: HashMap<i64, i64> = HashMap::default();
        for (row, key) in keys.iter().enumerate() {
            let id = *table.entry(*key).or_insert_with(|| {
                first_rows.push(row as u32);
                first_rows.len() as i64 - 1
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
