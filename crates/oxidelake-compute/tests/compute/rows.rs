//! Order-insensitive comparison of query results.

use arrow::array::{Array, FixedSizeListArray, Float64Array, Int64Array};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Int(_) => 1,
        Value::Float(_) => 2,
        Value::Text(_) => 3,
    }
}

fn cmp_values(x: &Value, y: &Value) -> std::cmp::Ordering {
    match (x, y) {
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
        (Value::Text(a), Value::Text(b)) => a.cmp(b),
        _ => rank(x).cmp(&rank(y)),
    }
}

/// All rows of `batches`, as values, sorted.
pub fn sorted_rows(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for batch in batches {
        for r in 0..batch.num_rows() {
            let row: Vec<Value> = batch
                .columns()
                .iter()
                .map(|c| value(c.as_ref(), r))
                .collect();
            rows.push(row);
        }
    }
    rows.sort_by(|x, y| {
        x.iter()
            .zip(y)
            .map(|(a, b)| cmp_values(a, b))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows
}

fn value(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Int64 => Value::Int(
            array
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(row),
        ),
        DataType::Float64 => Value::Float(
            array
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .value(row),
        ),
        DataType::FixedSizeList(..) => {
            let list = array.as_any().downcast_ref::<FixedSizeListArray>().unwrap();
            let inner = list.value(row);
            let f = ArrayFormatter::try_new(inner.as_ref(), &FormatOptions::default()).unwrap();
            Value::Text(
                (0..inner.len())
                    .map(|i| f.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            )
        }
        _ => {
            let f = ArrayFormatter::try_new(array, &FormatOptions::default()).unwrap();
            Value::Text(f.value(row).to_string())
        }
    }
}

/// Whether two floats of a result are the same: both NaN, or equal with the same sign of
/// zero where `rel_tol` is 0 (exact results: a filter's, a join's or a projection's), or
/// equal as numbers (`-0.0 = 0.0`, which aggregates may return either of) or within
/// `rel_tol` of each other when finite (summation order).
fn same_float(x: f64, y: f64, rel_tol: f64) -> bool {
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    if rel_tol == 0.0 {
        return x.to_bits() == y.to_bits();
    }
    x == y || (x.is_finite() && y.is_finite() && (x - y).abs() <= rel_tol * x.abs().max(y.abs()))
}

/// Asserts equal row multisets; floats may differ by `rel_tol` (summation order).
pub fn assert_same_rows(
    case: &str,
    ours: &[RecordBatch],
    stock: &[RecordBatch],
    rel_tol: f64,
) -> usize {
    let (a, b) = (sorted_rows(ours), sorted_rows(stock));
    assert_eq!(
        a.len(),
        b.len(),
        "{case}: row counts differ (ours {}, stock {})",
        a.len(),
        b.len()
    );
    for (i, (ra, rb)) in a.iter().zip(&b).enumerate() {
        assert_eq!(ra.len(), rb.len(), "{case}: column counts differ");
        for (va, vb) in ra.iter().zip(rb) {
            let same = match (va, vb) {
                (Value::Float(x), Value::Float(y)) => same_float(*x, *y, rel_tol),
                (x, y) => x == y,
            };
            assert!(
                same,
                "{case}: row {i} differs:\n ours  {ra:?}\n stock {rb:?}"
            );
        }
    }
    a.len()
}
