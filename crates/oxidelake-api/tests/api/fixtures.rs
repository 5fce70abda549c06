//! Two small Parquet tables written by DataFusion itself, and row comparison.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::SessionContext;
use oxidelake_api::{DataFrame, RecordBatch, Session};
use tempfile::TempDir;

/// `t(k, a, b, v)` with `v` a `FixedSizeList<Float32>` of 2, and `d(k, name)`, as
/// Parquet files in a temporary directory.
pub struct Lake {
    /// Holds the files until the test ends.
    _dir: TempDir,
    pub t: String,
    pub d: String,
}

const ROWS: i64 = 40;

fn t_batch() -> RecordBatch {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Float64, true),
        Field::new("v", DataType::FixedSizeList(Arc::clone(&item), 2), true),
    ]);
    let k: Int64Array = (0..ROWS).map(|i| (i % 7 != 3).then_some(i % 5)).collect();
    let a: Int64Array = (0..ROWS)
        .map(|i| (i % 9 != 4).then_some(i * 13 % 50))
        .collect();
    let b: Float64Array = (0..ROWS)
        .map(|i| (i % 11 != 2).then_some(i as f64 * 0.75 - 6.0))
        .collect();
    // Row 0 is the zero vector (cosine: NULL), every 6th row is NULL.
    let values: Float32Array = (0..ROWS * 2)
        .map(|j| {
            Some(if j < 2 {
                0.0
            } else {
                (j * 7 % 19) as f32 * 0.5 - 3.0
            })
        })
        .collect();
    let valid: Vec<bool> = (0..ROWS).map(|i| i % 6 != 5).collect();
    let v = FixedSizeListArray::new(item, 2, Arc::new(values), Some(valid.into()));
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(k) as ArrayRef,
            Arc::new(a),
            Arc::new(b),
            Arc::new(v),
        ],
    )
    .unwrap()
}

fn d_batch() -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(Int64Array::from(vec![
                Some(0),
                Some(1),
                Some(2),
                Some(4),
                None,
            ])) as ArrayRef,
            Arc::new(StringArray::from(vec![
                "zero", "one", "two", "four", "none",
            ])),
        ],
    )
    .unwrap()
}

async fn write(batch: RecordBatch, path: &str) {
    let ctx = SessionContext::new();
    ctx.read_batch(batch)
        .unwrap()
        .write_parquet(
            path,
            DataFrameWriteOptions::new().with_single_file_output(true),
            None,
        )
        .await
        .unwrap();
}

impl Lake {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
        let (t, d) = (path("t.parquet"), path("d.parquet"));
        write(t_batch(), &t).await;
        write(d_batch(), &d).await;
        Self { _dir: dir, t, d }
    }

    /// A local session with `t` and `d` registered.
    pub async fn session(&self) -> Session {
        let session = Session::local();
        self.register(&session).await;
        session
    }

    pub async fn register(&self, session: &Session) {
        session.register_parquet("t", &self.t).await.unwrap();
        session.register_parquet("d", &self.d).await.unwrap();
    }
}

/// The rows of `batches`, one `a|b|c` line each, sorted (row order is not part of any
/// of the compared queries; column names are not compared).
pub fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let cells: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for i in 0..batch.num_rows() {
            let row: Vec<String> = cells.iter().map(|c| c.value(i).to_string()).collect();
            rows.push(row.join("|"));
        }
    }
    rows.sort();
    rows
}

/// Asserts that a fluent DataFrame returns the rows `sql` returns, and that there are
/// at least `min_rows` of them.
pub async fn assert_same_as_sql(session: &Session, frame: DataFrame, sql: &str, min_rows: usize) {
    let fluent = rows(&frame.collect().await.unwrap());
    let sql_rows = rows(&session.sql(sql).await.unwrap().collect().await.unwrap());
    assert_eq!(fluent, sql_rows, "{sql}");
    assert!(
        fluent.len() >= min_rows,
        "{sql}: only {} rows",
        fluent.len()
    );
}
