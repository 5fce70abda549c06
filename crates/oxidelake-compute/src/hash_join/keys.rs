//! Join keys as the device's one Int64 key column.
//!
//! The device join table hashes one Int64 key. One key whose values are 64-bit
//! integers at heart (every integer type, dates, timestamps, decimals of up to 18
//! digits) goes to it widened to Int64: widening is one-to-one, so equal Int64 values
//! are equal keys. Several key columns, or one string or boolean column, become one
//! mixed-radix Int64 (`radix`) when the product of their spans fits. Any other key
//! (wider decimals, spans too wide) is numbered on the host: the build side's distinct
//! keys, encoded in Arrow's row format, get the numbers 0, 1, 2, … and each probe row
//! gets the number of its key, or NULL when the build side does not have it. The device
//! then joins on the numbers. The row format compares bytes, so two keys get one number
//! only when they are equal: no hash collision can join rows whose keys differ. A row
//! with a NULL in any key column gets a NULL number and never matches
//! (`NullEqualsNothing`, the only null equality the rule places).
//!
//! The numbering is one host hash-map pass per side (foldhash, as DataFusion's own
//! maps); moving it to the device (hashing the row format there, verifying on bytes)
//! changes only this file.

use arrow::array::{Array, ArrayRef, Int64Array};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use datafusion::common::HashMap;
use datafusion::error::Result;

use super::radix::{RadixKeys, all_valid};
use oxidelake_device::ops::{widened_to_int64, widens_exactly};

/// The key types a join can number: equality on them is equality of their row-format
/// bytes. Floats are left out (DataFusion's join compares `-0.0` and `0.0` as equal,
/// their bytes differ).
pub fn numbered_key_type(dt: &DataType) -> bool {
    widens_exactly(dt)
        || matches!(
            dt,
            DataType::Decimal128(_, _)
                | DataType::UInt64
                | DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
        )
}

/// How the key columns of one side become the device's key column.
#[derive(Debug)]
pub(crate) enum JoinKeys {
    /// One key column widened to Int64 (see [`widens_exactly`]).
    Widened(usize),
    /// Key columns numbered through the build side's dictionary.
    Numbered(Vec<usize>),
}

impl JoinKeys {
    /// The encoding for key columns `columns` of types `types`.
    pub(crate) fn new(columns: Vec<usize>, types: &[DataType]) -> Self {
        match (columns.as_slice(), types) {
            ([column], [dt]) if widens_exactly(dt) => JoinKeys::Widened(*column),
            _ => JoinKeys::Numbered(columns),
        }
    }

    fn columns(&self, batch: &RecordBatch) -> Vec<ArrayRef> {
        match self {
            JoinKeys::Widened(c) => vec![batch.column(*c).clone()],
            JoinKeys::Numbered(cs) => cs.iter().map(|c| batch.column(*c).clone()).collect(),
        }
    }
}

/// How probes find the build side's key numbers.
#[derive(Debug)]
pub(crate) enum KeyDictionary {
    /// Mixed-radix digits (`radix`).
    Radix(RadixKeys),
    /// The distinct build keys in row format.
    Rows {
        converter: RowConverter,
        numbers: HashMap<Box<[u8]>, i64>,
    },
}

/// The build side's device key column, and the dictionary probes number against.
pub(crate) fn build_keys(
    keys: &JoinKeys,
    batch: &RecordBatch,
) -> Result<(Int64Array, Option<KeyDictionary>)> {
    let columns = keys.columns(batch);
    if let JoinKeys::Widened(_) = keys {
        return Ok((widened_to_int64(columns[0].as_ref())?, None));
    }
    if let Some((radix, keys)) = RadixKeys::build(&columns)? {
        return Ok((keys, Some(KeyDictionary::Radix(radix))));
    }
    let converter = converter_for(&columns)?;
    let rows = converter.convert_columns(&columns)?;
    let valid = all_valid(&columns);
    let mut numbers: HashMap<Box<[u8]>, i64> = HashMap::default();
    let ids: Int64Array = (0..batch.num_rows())
        .map(|i| {
            if valid.as_ref().is_some_and(|v| v.is_null(i)) {
                return None;
            }
            let next = numbers.len() as i64;
            let bytes = rows.row(i);
            Some(match numbers.get(bytes.as_ref()) {
                Some(number) => *number,
                None => {
                    numbers.insert(bytes.as_ref().into(), next);
                    next
                }
            })
        })
        .collect();
    Ok((ids, Some(KeyDictionary::Rows { converter, numbers })))
}

/// A probe batch's device key column: the build numbers of its keys, NULL where the
/// build side lacks the key or a key column is NULL.
pub(crate) fn probe_keys(
    keys: &JoinKeys,
    dictionary: Option<&KeyDictionary>,
    batch: &RecordBatch,
) -> Result<Int64Array> {
    let columns = keys.columns(batch);
    let (converter, numbers) = match dictionary {
        None => return Ok(widened_to_int64(columns[0].as_ref())?),
        Some(KeyDictionary::Radix(radix)) => return radix.probe(&columns),
        Some(KeyDictionary::Rows { converter, numbers }) => (converter, numbers),
    };
    let rows = converter.convert_columns(&columns)?;
    let valid = all_valid(&columns);
    Ok((0..batch.num_rows())
        .map(|i| {
            if valid.as_ref().is_some_and(|v| v.is_null(i)) {
                return None;
            }
            numbers.get(rows.row(i).as_ref()).copied()
        })
        .collect())
}

fn converter_for(columns: &[ArrayRef]) -> Result<RowConverter> {
    let fields = columns
        .iter()
        .map(|c| SortField::new(c.data_type().clone()))
        .collect();
    Ok(RowConverter::new(fields)?)
}
