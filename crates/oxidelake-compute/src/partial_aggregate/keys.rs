//! Group keys as the device's one Int64 key column, and back.
//!
//! The device aggregation op groups by one Int64 column (its hash table claims slots with
//! 64-bit compare-and-swap). Keys reach it in one of three ways:
//! - no GROUP BY: a constant key, so the whole batch is one group;
//! - one integer or Date32 key: widened to Int64 (NULL stays NULL, its own group) and
//!   narrowed back afterwards, so the device hashes the real keys;
//! - anything else (several keys, strings, decimals): the host numbers the distinct keys
//!   of the batch, digit by digit (`digits`) when every key column is integer-like, a
//!   string or a boolean, through Arrow's row format (one foldhash map lookup per row)
//!   otherwise, and the device groups and aggregates by that number; each group's key
//!   values are taken from the first row that had them.
//!
//! Float keys group as DataFusion groups them: `-0.0` and `+0.0` are one group, keyed
//! `+0.0` (the row format alone would order them apart), so a partial state never holds a
//! key the final aggregate would merge with another.
//!
//! The third way spends one host pass on hashing that a GPU would rather do itself; it
//! keeps multi-column and string keys exact today, and moving it to the device (hashing
//! the row format there) changes only this file.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, UInt32Array};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};
use datafusion::common::HashMap;
use datafusion::common::utils::normalize_float_zero;
use datafusion::error::{DataFusionError, Result};

use super::digits;
use super::spec::{DeviceValues, to_device, to_state};

/// How a batch's group keys become the device's key column.
#[derive(Debug)]
pub(crate) enum KeyEncoding {
    /// No GROUP BY: one group.
    Constant,
    /// One Int8/16/32/64 or Date32 key, widened to Int64.
    Integer(DataType),
    /// Keys numbered on the host through Arrow's row format.
    Numbered(RowConverter),
}

/// One batch's keys in device form.
pub(crate) struct EncodedKeys {
    /// The Int64 key column the device groups by.
    pub(crate) column: Int64Array,
    /// For numbered keys: the first row of each key number.
    first_rows: Vec<u32>,
}

impl KeyEncoding {
    /// The encoding for key columns `keys` of `schema`, or why they are not covered.
    pub(crate) fn for_keys(
        schema: &SchemaRef,
        keys: &[usize],
    ) -> std::result::Result<Self, String> {
        let types: Vec<DataType> = keys
            .iter()
            .map(|k| {
                schema
                    .fields()
                    .get(*k)
                    .map(|f| f.data_type().clone())
                    .ok_or_else(|| format!("group key column {k} out of range"))
            })
            .collect::<std::result::Result<_, _>>()?;
        match types.as_slice() {
            [] => Ok(KeyEncoding::Constant),
            [
                dt @ (DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Date32),
            ] => Ok(KeyEncoding::Integer(dt.clone())),
            _ => {
                let fields: Vec<SortField> = types.iter().cloned().map(SortField::new).collect();
                if !RowConverter::supports_fields(&fields) {
                    return Err(format!("group key types {types:?}"));
                }
                RowConverter::new(fields)
                    .map(KeyEncoding::Numbered)
                    .map_err(|e| format!("group keys: {e}"))
            }
        }
    }

    /// The device key column of `batch`'s `keys`.
    pub(crate) fn encode(&self, batch: &RecordBatch, keys: &[usize]) -> Result<EncodedKeys> {
        let rows = batch.num_rows();
        let column = |i: usize| -> Result<&ArrayRef> {
            keys.get(i)
                .map(|k| batch.column(*k))
                .ok_or_else(|| DataFusionError::Internal("group key index".into()))
        };
        Ok(match self {
            KeyEncoding::Constant => EncodedKeys {
                column: Int64Array::new(ScalarBuffer::from(vec![0i64; rows]), None),
                first_rows: Vec::new(),
            },
            KeyEncoding::Integer(_) => {
                // Widened as the aggregate values are (one numeric model on the device).
                let DeviceValues::Int(widened) = to_device(column(0)?, false)? else {
                    return Err(DataFusionError::Internal(
                        "an integer group key did not widen to Int64".into(),
                    ));
                };
                EncodedKeys {
                    column: widened,
                    first_rows: Vec::new(),
                }
            }
            KeyEncoding::Numbered(converter) => {
                let columns: Vec<ArrayRef> = keys
                    .iter()
                    .map(|k| normalize_float_zero(batch.column(*k)))
                    .collect();
                if digits::digit_types(
                    &columns
                        .iter()
                        .map(|c| c.data_type().clone())
                        .collect::<Vec<_>>(),
                ) && let Some((ids, first_rows)) = digits::number_groups(&columns)?
                {
                    return Ok(EncodedKeys {
                        column: Int64Array::from(ids),
                        first_rows,
                    });
                }
                let converted = converter.convert_columns(&columns)?;
                let mut numbers: HashMap<&[u8], i64> = HashMap::default();
                let mut first_rows = Vec::new();
                let mut ids = Vec::with_capacity(rows);
                for row in 0..rows {
                    let next = first_rows.len() as i64;
                    let id = *numbers.entry(converted.row(row).data()).or_insert_with(|| {
                        first_rows.push(row as u32);
                        next
                    });
                    ids.push(id);
                }
                EncodedKeys {
                    column: Int64Array::from(ids),
                    first_rows,
                }
            }
        })
    }

    /// The key columns of the groups the device returned, in its group order.
    pub(crate) fn decode(
        &self,
        encoded: &EncodedKeys,
        group_keys: &Int64Array,
        batch: &RecordBatch,
        keys: &[usize],
    ) -> Result<Vec<ArrayRef>> {
        Ok(match self {
            KeyEncoding::Constant => Vec::new(),
            KeyEncoding::Integer(dt) => {
                let widened: ArrayRef = Arc::new(group_keys.clone());
                vec![to_state(&widened, dt)?]
            }
            KeyEncoding::Numbered(_) => {
                let mut take = Vec::with_capacity(group_keys.len());
                for (i, id) in group_keys.iter().enumerate() {
                    let row = id
                        .and_then(|id| usize::try_from(id).ok())
                        .and_then(|id| encoded.first_rows.get(id))
                        .ok_or_else(|| {
                            DataFusionError::Internal(format!(
                                "device returned group number {id:?} at {i}, {} numbered",
                                encoded.first_rows.len()
                            ))
                        })?;
                    take.push(*row);
                }
                let indices = UInt32Array::from(take);
                keys.iter()
                    .map(|k| {
                        let first = arrow::compute::take(batch.column(*k), &indices, None)?;
                        Ok(normalize_float_zero(&first))
                    })
                    .collect::<Result<Vec<_>>>()?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::array::StringViewArray;
    use arrow::datatypes::Int32Type;
    use arrow::datatypes::{Field, Schema};

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("flag", DataType::Utf8View, true),
            Field::new("n", DataType::Int32, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringViewArray::from(vec![
                    Some("A"),
                    Some("B"),
                    Some("A"),
                    None,
                    Some("A"),
                ])),
                Arc::new(arrow::array::Int32Array::from(vec![
                    Some(1),
                    Some(1),
                    Some(2),
                    Some(1),
                    Some(1),
                ])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn string_and_composite_keys_are_numbered_in_first_seen_order_and_decode_to_their_values() {
        let b = batch();
        let enc = KeyEncoding::for_keys(&b.schema(), &[0, 1]).unwrap();
        assert!(matches!(enc, KeyEncoding::Numbered(_)));
        let keys = enc.encode(&b, &[0, 1]).unwrap();
        assert_eq!(keys.column.values().to_vec(), vec![0, 1, 2, 3, 0]);
        let groups = Int64Array::from(vec![3, 0, 2]);
        let cols = enc.decode(&keys, &groups, &b, &[0, 1]).unwrap();
        let flags: Vec<Option<&str>> = cols[0].as_string_view().iter().collect();
        assert_eq!(flags, vec![None, Some("A"), Some("A")]);
        let ns: Vec<Option<i32>> = cols[1].as_primitive::<Int32Type>().iter().collect();
        assert_eq!(ns, vec![Some(1), Some(1), Some(2)]);
    }

    #[test]
    fn a_single_int32_key_is_widened_for_the_device_and_narrowed_back() {
        let b = batch();
        let enc = KeyEncoding::for_keys(&b.schema(), &[1]).unwrap();
        let keys = enc.encode(&b, &[1]).unwrap();
        assert_eq!(keys.column.values().to_vec(), vec![1, 1, 2, 1, 1]);
        let groups = Int64Array::from(vec![Some(2), None]);
        let cols = enc.decode(&keys, &groups, &b, &[1]).unwrap();
        assert_eq!(cols[0].data_type(), &DataType::Int32);
        assert_eq!(
            cols[0]
                .as_primitive::<Int32Type>()
                .iter()
                .collect::<Vec<_>>(),
            vec![Some(2), None]
        );
    }

    #[test]
    fn signed_zero_float_keys_are_one_group_keyed_positive_zero_as_datafusion_groups_them() {
        use arrow::array::{Array, Float64Array};
        use arrow::datatypes::Float64Type;
        let schema = Arc::new(Schema::new(vec![Field::new("f", DataType::Float64, true)]));
        let b = RecordBatch::try_new(
            schema,
            vec![Arc::new(Float64Array::from(vec![
                Some(-0.0),
                Some(0.0),
                Some(f64::NAN),
                None,
                Some(-0.0),
                Some(f64::NAN),
            ]))],
        )
        .unwrap();
        let enc = KeyEncoding::for_keys(&b.schema(), &[0]).unwrap();
        let keys = enc.encode(&b, &[0]).unwrap();
        assert_eq!(keys.column.values().to_vec(), vec![0, 0, 1, 2, 0, 1]);
        let cols = enc
            .decode(&keys, &Int64Array::from(vec![0, 1, 2]), &b, &[0])
            .unwrap();
        let f = cols[0].as_primitive::<Float64Type>();
        assert_eq!(f.value(0).to_bits(), 0.0f64.to_bits(), "keyed +0.0");
        assert!(f.value(1).is_nan());
        assert!(f.is_null(2));
    }

    #[test]
    fn a_group_number_the_batch_never_had_is_an_error() {
        let b = batch();
        let enc = KeyEncoding::for_keys(&b.schema(), &[0]).unwrap();
        let keys = enc.encode(&b, &[0]).unwrap();
        assert!(
            enc.decode(&keys, &Int64Array::from(vec![7]), &b, &[0])
                .is_err()
        );
    }
}
