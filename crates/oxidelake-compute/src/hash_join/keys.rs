//! Join keys as the device's one Int64 key column.
//!
//! The device join table hashes one Int64 key. One Int64 key pair goes to it as it is.
//! Any other key (several columns, Int32, Date32, decimals, strings) is numbered on the
//! host: the build side's distinct keys, encoded in Arrow's row format, get the numbers
//! 0, 1, 2, … and each probe row gets the number of its key, or NULL when the build side
//! does not have it. The device then joins on the numbers. The row format compares
//! bytes, so two keys get one number only when they are equal: no hash collision can
//! join rows whose keys differ. A row with a NULL in any key column gets a NULL number
//! and never matches (`NullEqualsNothing`, the only null equality the rule places).
//!
//! The numbering is one host hash-map pass per side; moving it to the device (hashing
//! the row format there, verifying on bytes) changes only this file.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, Int64Array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use datafusion::error::{DataFusionError, Result};

/// The key types a join can number: equality on them is equality of their row-format
/// bytes. Floats are left out (DataFusion's join compares `-0.0` and `0.0` as equal,
/// their bytes differ).
pub fn numbered_key_type(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Boolean
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

/// How the key columns of one side become the device's key column.
#[derive(Debug)]
pub(crate) enum JoinKeys {
    /// One Int64 key column, used as it is.
    Int64(usize),
    /// Key columns numbered through the build side's dictionary.
    Numbered(Vec<usize>),
}

impl JoinKeys {
    /// The encoding for key columns `columns` of types `types`.
    pub(crate) fn new(columns: Vec<usize>, types: &[DataType]) -> Self {
        match (columns.as_slice(), types) {
            ([column], [DataType::Int64]) => JoinKeys::Int64(*column),
            _ => JoinKeys::Numbered(columns),
        }
    }

    fn columns(&self, batch: &RecordBatch) -> Vec<ArrayRef> {
        match self {
            JoinKeys::Int64(c) => vec![batch.column(*c).clone()],
            JoinKeys::Numbered(cs) => cs.iter().map(|c| batch.column(*c).clone()).collect(),
        }
    }
}

/// The build side's key numbers: the distinct build keys in row format.
#[derive(Debug)]
pub(crate) struct KeyDictionary {
    converter: RowConverter,
    numbers: HashMap<Box<[u8]>, i64>,
}

/// The build side's device key column, and the dictionary probes number against.
pub(crate) fn build_keys(
    keys: &JoinKeys,
    batch: &RecordBatch,
) -> Result<(Int64Array, Option<KeyDictionary>)> {
    let columns = keys.columns(batch);
    if let JoinKeys::Int64(_) = keys {
        return Ok((int64(&columns[0])?.clone(), None));
    }
    let converter = converter_for(&columns)?;
    let rows = converter.convert_columns(&columns)?;
    let valid = all_valid(&columns);
    let mut numbers: HashMap<Box<[u8]>, i64> = HashMap::new();
    let ids: Int64Array = (0..batch.num_rows())
        .map(|i| {
            if valid.as_ref().is_some_and(|v| v.is_null(i)) {
                return None;
            }
            let next = numbers.len() as i64;
            Some(*numbers.entry(rows.row(i).as_ref().into()).or_insert(next))
        })
        .collect();
    Ok((ids, Some(KeyDictionary { converter, numbers })))
}

/// A probe batch's device key column: the build numbers of its keys, NULL where the
/// build side lacks the key or a key column is NULL.
pub(crate) fn probe_keys(
    keys: &JoinKeys,
    dictionary: Option<&KeyDictionary>,
    batch: &RecordBatch,
) -> Result<Int64Array> {
    let columns = keys.columns(batch);
    let Some(dictionary) = dictionary else {
        return Ok(int64(&columns[0])?.clone());
    };
    let rows = dictionary.converter.convert_columns(&columns)?;
    let valid = all_valid(&columns);
    Ok((0..batch.num_rows())
        .map(|i| {
            if valid.as_ref().is_some_and(|v| v.is_null(i)) {
                return None;
            }
            dictionary.numbers.get(rows.row(i).as_ref()).copied()
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

/// The rows where every key column is valid (`None`: all of them).
fn all_valid(columns: &[ArrayRef]) -> Option<NullBuffer> {
    columns.iter().fold(None, |acc, c| {
        NullBuffer::union(acc.as_ref(), c.logical_nulls().as_ref())
    })
}

fn int64(column: &ArrayRef) -> Result<&Int64Array> {
    column
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| DataFusionError::Internal("join key is not Int64".into()))
}
