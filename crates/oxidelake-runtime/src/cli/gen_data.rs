//! `oxide gen-data`: the synthetic dataset and TPC-H, written as lake Parquet.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;
use oxidelake_storage::{ENGINE_BATCH_ROWS, LakeParquetWriter, LakeWriterOptions, WrittenFile};

use super::progress::Progress;

/// Number of distinct keys in the synthetic table (a low-cardinality GROUP BY key).
pub const SYNTHETIC_KEYS: i64 = 64;
/// Dimensions of the synthetic embedding column.
pub const SYNTHETIC_DIM: i32 = 8;

/// The synthetic table's schema: `id`, `k` (key), `v` (Int64 value), `x` (Float64) and
/// `emb` (FixedSizeList<Float32, 8>).
pub fn synthetic_schema() -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
        Field::new("emb", DataType::FixedSizeList(item, SYNTHETIC_DIM), false),
    ]))
}

/// `k` of row `id`.
pub fn synthetic_k(id: i64) -> i64 {
    id % SYNTHETIC_KEYS
}

/// `v` of row `id`.
pub fn synthetic_v(id: i64) -> i64 {
    (id * 7_919) % 1_000
}

/// Rows `start..start + n` of the synthetic table.
pub fn synthetic_batch(start: i64, n: usize) -> Result<RecordBatch, EngineError> {
    let ids: Vec<i64> = (start..start + n as i64).collect();
    let dim = SYNTHETIC_DIM as usize;
    let values: Vec<f32> = ids
        .iter()
        .flat_map(|id| (0..dim).map(move |d| ((id * 31 + d as i64 * 17) % 101) as f32 / 100.0))
        .collect();
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(Int64Array::from_iter_values(
            ids.iter().map(|i| synthetic_k(*i)),
        )),
        Arc::new(Int64Array::from_iter_values(
            ids.iter().map(|i| synthetic_v(*i)),
        )),
        Arc::new(Float64Array::from_iter(
            ids.iter()
                .map(|i| (i % 10 != 0).then_some((i % 1_000) as f64 / 4.0)),
        )),
        Arc::new(FixedSizeListArray::new(
            item,
            SYNTHETIC_DIM,
            Arc::new(Float32Array::from(values)),
            None,
        )),
    ];
    Ok(RecordBatch::try_new(synthetic_schema(), columns)?)
}

fn create_dir(dir: &Path) -> Result<(), EngineError> {
    std::fs::create_dir_all(dir).map_err(|e| EngineError::io(dir.display().to_string(), e))
}

/// Writes `rows` synthetic rows as table `t` under `out` (`out/t/part-0.parquet`).
pub fn generate_synthetic(
    out: &Path,
    rows: u64,
    options: &LakeWriterOptions,
) -> Result<WrittenFile, EngineError> {
    let dir = out.join("t");
    create_dir(&dir)?;
    let mut writer =
        LakeParquetWriter::create(dir.join("part-0.parquet"), synthetic_schema(), options)?;
    let mut progress = Progress::new("t", rows);
    let mut start = 0u64;
    while start < rows {
        let n = (rows - start).min(ENGINE_BATCH_ROWS as u64);
        writer.write(&synthetic_batch(start as i64, n as usize)?)?;
        progress.advance(n);
        start += n;
    }
    progress.finish();
    writer.finish()
}

/// The TPC-H tables, with the scale factor's row counts as progress totals.
fn tpch_tables(sf: f64) -> Vec<(&'static str, u64)> {
    let scaled = |base: f64| (base * sf).max(1.0) as u64;
    vec![
        ("region", 5),
        ("nation", 25),
        ("supplier", scaled(10_000.0)),
        ("customer", scaled(150_000.0)),
        ("part", scaled(200_000.0)),
        ("partsupp", scaled(800_000.0)),
        ("orders", scaled(1_500_000.0)),
        ("lineitem", scaled(6_001_215.0)),
    ]
}

fn batches_of(
    table: &str,
    sf: f64,
) -> Box<dyn Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>>> {
    use tpchgen::generators::{
        CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
        PartSuppGenerator, RegionGenerator, SupplierGenerator,
    };
    use tpchgen_arrow::{
        CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow,
        RegionArrow, SupplierArrow,
    };
    let size = ENGINE_BATCH_ROWS;
    match table {
        "region" => {
            Box::new(RegionArrow::new(RegionGenerator::new(sf, 1, 1)).with_batch_size(size))
        }
        "nation" => {
            Box::new(NationArrow::new(NationGenerator::new(sf, 1, 1)).with_batch_size(size))
        }
        "supplier" => {
            Box::new(SupplierArrow::new(SupplierGenerator::new(sf, 1, 1)).with_batch_size(size))
        }
        "customer" => {
            Box::new(CustomerArrow::new(CustomerGenerator::new(sf, 1, 1)).with_batch_size(size))
        }
        "part" => Box::new(PartArrow::new(PartGenerator::new(sf, 1, 1)).with_batch_size(size)),
        "partsupp" => {
            Box::new(PartSuppArrow::new(PartSuppGenerator::new(sf, 1, 1)).with_batch_size(size))
        }
        "orders" => Box::new(OrderArrow::new(OrderGenerator::new(sf, 1, 1)).with_batch_size(size)),
        _ => Box::new(LineItemArrow::new(LineItemGenerator::new(sf, 1, 1)).with_batch_size(size)),
    }
}

/// Writes the eight TPC-H tables at `scale_factor` under `out/<table>/part-0.parquet`.
pub fn generate_tpch(
    out: &Path,
    scale_factor: f64,
    options: &LakeWriterOptions,
) -> Result<Vec<(String, WrittenFile)>, EngineError> {
    if !(scale_factor > 0.0 && scale_factor.is_finite()) {
        return Err(EngineError::InvalidArgument {
            what: "scale factor",
            detail: format!("{scale_factor} is not a positive number"),
        });
    }
    let mut written = Vec::new();
    for (table, expected_rows) in tpch_tables(scale_factor) {
        let dir = out.join(table);
        create_dir(&dir)?;
        let mut batches = batches_of(table, scale_factor).peekable();
        let first = match batches.peek() {
            Some(Ok(b)) => b.schema(),
            Some(Err(e)) => {
                return Err(EngineError::Internal(format!("tpchgen {table}: {e}")));
            }
            None => continue,
        };
        let mut writer = LakeParquetWriter::create(dir.join("part-0.parquet"), first, options)?;
        let mut progress = Progress::new(table, expected_rows);
        for batch in batches {
            let batch = batch?;
            writer.write(&batch)?;
            progress.advance(batch.num_rows() as u64);
        }
        progress.finish();
        written.push((table.to_string(), writer.finish()?));
    }
    Ok(written)
}
