//! All 22 TPC-H queries, placed for CUDA (the GPU operators' CPU paths here, or the
//! emulated or real device with `OXIDE_BACKEND=cuda`) and placed for the CPU, equal an
//! independent engine: DuckDB reading the same Parquet files (`scripts/duckdb_query.py`).
//!
//! Needs a Python with the `duckdb` package: `.ci/run` installs it into its cache and
//! runs this test with `OXIDE_DUCKDB_PYTHONPATH` set. `OXIDE_TPCH_SF` picks the scale
//! factor (0.1 in CI; the SF 1 run is in docs/placement-coverage.md).

use std::path::Path;
use std::process::Command as Process;

use oxidelake_runtime::cli::tpch::tpch_query;

use super::data::{cells, tpch_lake};

/// Numbers equal within a cent plus a relative 1e-9 (DuckDB computes AVG in doubles,
/// we in decimals); anything else equal as text. (Also `device_faults`'s comparison.)
pub fn cell_equal(ours: &Option<String>, theirs: &Option<String>) -> bool {
    match (ours, theirs) {
        (None, None) => true,
        (Some(a), Some(b)) => match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
            (Ok(x), Ok(y)) => (x - y).abs() <= 0.01 + y.abs() * 1e-9,
            _ => a.trim() == b.trim(),
        },
        _ => false,
    }
}

/// DuckDB's rows for `statements` over the Parquet tables under `data`, with the `duckdb`
/// package from `python_path` (`scripts/duckdb_query.py`): the rows of the last
/// statement that returns rows.
pub fn duckdb_rows(
    python_path: &str,
    data: &Path,
    statements: &[String],
) -> Vec<Vec<Option<String>>> {
    let sql = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(sql.path(), statements.join(";\n") + ";\n").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/duckdb_query.py");
    let out = Process::new("python3")
        .arg(script)
        .arg(data)
        .arg(sql.path())
        .env("PYTHONPATH", python_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "duckdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Placed for cuda, the GPU operators run between device transitions (ADR-0014, the
/// only device path since issue #45): some plans must show a `HostToDeviceExec`. On the
/// CPU backend the batches stay on the host and the operators run their CPU paths; on
/// `CudaBackend` (`scripts/test-cuda-emulated.sh`) they work on the batches in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DuckDB: OXIDE_DUCKDB_PYTHONPATH=<dir with the duckdb package> (.ci/run sets it)"]
async fn all_22_tpch_queries_placed_for_cuda_equal_duckdb() {
    all_22_equal_duckdb("cuda").await;
}

/// Placed for the CPU, the stock operators run, with the join filters of
/// `JoinFilterExec` above the scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs DuckDB: OXIDE_DUCKDB_PYTHONPATH=<dir with the duckdb package> (.ci/run sets it)"]
async fn all_22_tpch_queries_placed_for_cpu_equal_duckdb() {
    all_22_equal_duckdb("cpu").await;
}

/// Runs the 22 queries placed for `placement` and compares each answer with DuckDB's;
/// plans placed for cuda must cross to the device explicitly (some `HostToDeviceExec`),
/// plans placed for the CPU never.
async fn all_22_equal_duckdb(placement: &str) {
    let python_path = std::env::var("OXIDE_DUCKDB_PYTHONPATH")
        .expect("OXIDE_DUCKDB_PYTHONPATH names the folder holding the duckdb package");
    let sf: f64 = std::env::var("OXIDE_TPCH_SF")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.1);
    let (dir, session) = tpch_lake(sf).await;
    session
        .sql(&format!("SET oxidelake.placement.target = '{placement}'"))
        .await
        .unwrap();
    let mut compared = 0;
    let mut with_transitions = 0;
    for query in 1..=22 {
        let statements = tpch_query(query, sf).unwrap();
        let mut ours = Vec::new();
        for (i, statement) in statements.iter().enumerate() {
            if statements.len() == 1 || i == 1 {
                let plan = session.physical_plan(statement).await.unwrap();
                let text = datafusion::physical_plan::displayable(plan.as_ref())
                    .indent(false)
                    .to_string();
                with_transitions += usize::from(text.contains("HostToDeviceExec"));
            }
            let batches = session.sql(statement).await.unwrap();
            // Q15 is create view / query / drop view: the query's rows are the answer.
            if statements.len() == 1 || i == 1 {
                ours = cells(&batches);
            }
        }
        let theirs = duckdb_rows(&python_path, dir.path(), &statements);
        assert_eq!(
            ours.len(),
            theirs.len(),
            "Q{query}: {} rows here, {} in DuckDB",
            ours.len(),
            theirs.len()
        );
        for (row, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| cell_equal(x, y)),
                "Q{query} row {row}: {a:?} here, {b:?} in DuckDB"
            );
        }
        println!(
            "tpch oracle: Q{query} placed {placement} equals DuckDB ({} rows)",
            ours.len()
        );
        compared += 1;
    }
    assert_eq!(compared, 22);
    println!("tpch oracle: {with_transitions} of 22 plans cross to the device explicitly");
    if placement == "cuda" {
        assert!(
            with_transitions > 0,
            "no plan placed for cuda had a HostToDeviceExec"
        );
    } else {
        assert_eq!(
            with_transitions, 0,
            "transitions only in plans placed for a device"
        );
    }
}
