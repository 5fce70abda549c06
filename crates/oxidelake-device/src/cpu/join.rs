//! The CPU's join operators over device batches: the Int64 key each row joins on (one
//! integer-like column's image, or several combined by mixed radix, as the device
//! computes them), the probe's rows, and the joined output gathered with arrow's `take`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, UInt32Array};
use arrow::buffer::NullBuffer;
use arrow::compute::take;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use oxidelake_core::EngineError;

use super::CpuJoinTable;
use crate::ops::{
    JoinArgs, JoinColumn, JoinKey, ProbeRows, load_images, validate, widened_to_int64,
};

/// The key of each row of `batch` read as `key` says; NULL where a row has none (a NULL
/// key column, or a radix digit outside its span), and such a row never joins.
pub(crate) fn join_keys(batch: &RecordBatch, key: JoinKey<'_>) -> Result<Int64Array, EngineError> {
    let column = |c: usize| column_of(batch, c, "join key column");
    match key {
        JoinKey::Column(c) => widened_to_int64(column(c)?.as_ref()),
        JoinKey::Radix(digits) => {
            let rows = batch.num_rows();
            let mut keys = vec![0i64; rows];
            let mut valid = vec![true; rows];
            for digit in digits {
                let column = column(digit.column)?;
                let images = load_images(column.as_ref())?;
                let nulls = column.logical_nulls();
                for row in 0..rows {
                    let offset = i128::from(images[row]) - i128::from(digit.min);
                    let inside = (0..i128::from(digit.span)).contains(&offset);
                    if !inside || nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                        valid[row] = false;
                        continue;
                    }
                    keys[row] = keys[row].wrapping_add((offset as i64).wrapping_mul(digit.stride));
                }
            }
            Ok(Int64Array::new(keys.into(), Some(NullBuffer::from(valid))))
        }
    }
}

/// The probe rows `rows` asks for, with their build rows for pairs (empty otherwise).
/// A semi or anti join looks each key up once, without listing its pairs.
fn probed_rows(
    table: &CpuJoinTable,
    keys: &Int64Array,
    rows: ProbeRows,
) -> Result<(UInt32Array, UInt32Array), EngineError> {
    if rows == ProbeRows::Pairs {
        let matches = table.probe(keys)?;
        return Ok((matches.build_indices, matches.probe_indices));
    }
    let matched = table.matched(keys);
    let want = rows == ProbeRows::Matched;
    let chosen: UInt32Array = (0..keys.len() as u32)
        .filter(|r| matched[*r as usize] == want)
        .collect();
    Ok((UInt32Array::from(Vec::<u32>::new()), chosen))
}

/// Column `c` of `batch`, or the error naming it as `what`.
fn column_of<'a>(
    batch: &'a RecordBatch,
    c: usize,
    what: &'static str,
) -> Result<&'a ArrayRef, EngineError> {
    batch
        .columns()
        .get(c)
        .ok_or_else(|| EngineError::InvalidArgument {
            what,
            detail: format!("column {c} of {}", batch.num_columns()),
        })
}

/// See [`crate::GpuBackend::join`]: `build` and `probe` are the host forms of the
/// arguments' batches.
pub(crate) fn join(
    table: &CpuJoinTable,
    build: Option<&RecordBatch>,
    probe: &RecordBatch,
    args: &JoinArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    validate::join_output(args)?;
    let keys = join_keys(probe, args.key)?;
    let (build_rows, probe_rows) = probed_rows(table, &keys, args.rows)?;
    let columns = args
        .output
        .iter()
        .map(|column| match (column, build) {
            (JoinColumn::Probe(c), _) => Ok(take(
                column_of(probe, *c, "join output column")?,
                &probe_rows,
                None,
            )?),
            (JoinColumn::ProbeRow, _) => Ok(Arc::new(probe_rows.clone()) as ArrayRef),
            (JoinColumn::Build(c), Some(build)) => Ok(take(
                column_of(build, *c, "join output column")?,
                &build_rows,
                None,
            )?),
            (JoinColumn::BuildRow, _) => Ok(Arc::new(build_rows.clone()) as ArrayRef),
            (JoinColumn::Build(_), None) => Err(EngineError::Internal(
                "a build column without the build batch passed the checks".into(),
            )),
        })
        .collect::<Result<Vec<ArrayRef>, EngineError>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(probe_rows.len()));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(&args.schema),
        columns,
        &options,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::RadixDigit;
    use arrow::array::Int32Array;

    #[test]
    fn a_radix_key_combines_its_digits_and_has_none_outside_a_span_or_on_a_null() {
        let a = Int32Array::from(vec![Some(0), Some(2), Some(1), None, Some(9)]);
        let b = Int32Array::from(vec![Some(10), Some(11), Some(12), Some(10), Some(10)]);
        let batch = RecordBatch::try_from_iter(vec![
            ("a", Arc::new(a) as ArrayRef),
            ("b", Arc::new(b) as ArrayRef),
        ])
        .unwrap();
        let digits = [
            RadixDigit {
                column: 0,
                min: 0,
                span: 3,
                stride: 1,
            },
            RadixDigit {
                column: 1,
                min: 10,
                span: 2,
                stride: 3,
            },
        ];
        let keys = join_keys(&batch, JoinKey::Radix(&digits)).unwrap();
        let got: Vec<Option<i64>> = keys.iter().collect();
        assert_eq!(got, vec![Some(0), Some(5), None, None, None]);
    }
}
