//! `oxide demo`: the main job on the embedded default, from nothing to placed, timed
//! queries: generates a small dataset when there is none, then runs a few queries as
//! this machine places them and as a CUDA machine would.
//!
//! The dataset is published atomically (written in a temporary sibling directory, then
//! renamed into place), so an interrupted run never leaves a dataset directory that a
//! later run would take for complete; a directory that is there but not a complete
//! dataset (from an older `oxide`, or damaged) is an error saying to delete it. See
//! `demo/dataset.rs`.

mod dataset;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use oxidelake_core::EngineError;

use super::gen_data::SYNTHETIC_DIM;
use super::output::{Format, MaxRows, write_batches};
use crate::{DetectorProbe, OxideSession, PlacementTarget};

fn queries() -> Vec<(&'static str, String)> {
    let query_vector = vec!["0.5"; SYNTHETIC_DIM as usize].join(", ");
    vec![
        (
            "grouped aggregate",
            "SELECT k, SUM(v) AS sum_v, COUNT(v) AS n, MIN(x) AS min_x, MAX(x) AS max_x \
             FROM t GROUP BY k ORDER BY k LIMIT 5"
                .to_string(),
        ),
        (
            "selective filter",
            "SELECT id, k, v FROM t WHERE v < 3 AND x >= 200.0 ORDER BY id LIMIT 5".to_string(),
        ),
        (
            "nearest vectors",
            format!(
                "SELECT id, array_distance(emb, [{query_vector}]) AS dist FROM t \
                 ORDER BY dist, id LIMIT 5"
            ),
        ),
    ]
}

fn say(out: &mut impl Write, text: impl AsRef<str>) -> Result<(), EngineError> {
    writeln!(out, "{}", text.as_ref()).map_err(|e| EngineError::io("stdout", e))
}

/// Runs the demo over the dataset in `dir`, first generating `rows` rows there when
/// `dir` is missing or empty. A `dir` holding anything but a complete demo dataset is an
/// [`EngineError::Format`] that says to delete it.
pub async fn demo(dir: &Path, rows: u64, out: &mut impl Write) -> Result<(), EngineError> {
    let table_dir = dir.join(dataset::TABLE);
    if !dataset::is_complete(dir)? {
        say(
            out,
            format!(
                "generating {rows} rows of synthetic data in {}",
                dir.display()
            ),
        )?;
        let started = Instant::now();
        let written = dataset::generate(dir, rows)?;
        say(
            out,
            format!(
                "wrote {} ({} row groups, {} bytes) in {:.2} s",
                written.path.display(),
                written.row_groups,
                written.bytes,
                started.elapsed().as_secs_f64()
            ),
        )?;
    }
    let table_path = format!("{}/", table_dir.display());
    let sessions = [
        ("this machine (auto)", PlacementTarget::Auto),
        ("placed for CUDA", PlacementTarget::Cuda),
    ];
    for (title, sql) in queries() {
        say(out, format!("\n== {title}\n{sql}"))?;
        for (label, target) in sessions {
            let session = OxideSession::local_with(target, Arc::new(DetectorProbe));
            session.register_parquet("t", &table_path).await?;
            say(out, format!("\n-- {label}: plan"))?;
            say(out, session.explain(&sql).await?.trim_end())?;
            let started = Instant::now();
            let batches = session.sql(&sql).await?;
            let elapsed = started.elapsed();
            if let (PlacementTarget::Auto, Some(first)) = (target, batches.first()) {
                write_batches(
                    first.schema(),
                    &batches,
                    Format::Table,
                    MaxRows::Unlimited,
                    out,
                )?;
            }
            say(
                out,
                format!("-- {label}: {:.1} ms", elapsed.as_secs_f64() * 1000.0),
            )?;
        }
    }
    say(
        out,
        "\nGPU operators on a machine without that GPU run their CPU paths; STATUS.md says \
         what has run on a GPU.",
    )
}
