//! SUM over integers and decimals whose result leaves its type (issue 44): the same
//! overflow error placed for cpu (DataFusion's aggregates with OxideLake's checked
//! `sum`) and for cuda (the device partial aggregate, reading the device batches of the
//! filter below it, under the stock final), where DataFusion 55's `sum` wrapped to a
//! negative number; and the same exact total where only partial sums leave the type. On this
//! machine the cuda placements run the GPU operators' CPU paths;
//! `scripts/test-cuda-emulated.sh` runs these tests again with `OXIDE_BACKEND=cuda`
//! (they sit under `differential`), where the device sums.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal128Array, Int64Array};
use arrow::record_batch::RecordBatch;
use oxidelake_core::BackendKind;
use oxidelake_planner::FixedProbe;
use oxidelake_runtime::{OxideSession, PlacementTarget};
use oxidelake_storage::{LakeWriterOptions, write_parquet_file};

use crate::runtime::data::sorted_rows;

/// Where a session places its plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    Cpu,
    /// Cuda: GPU operators between device transitions (the only device path, issue #45).
    Cuda,
}

const PLACEMENTS: [Placement; 2] = [Placement::Cpu, Placement::Cuda];

/// Writes `batch` as the one file of table `name` under `dir`; the table's directory.
fn write_table(dir: &Path, name: &str, batch: &RecordBatch) -> String {
    write_table_files(dir, name, std::slice::from_ref(batch))
}

/// Writes each of `batches` as a file of table `name` under `dir` (so that a scan reads
/// them as partitions of their own); the table's directory.
fn write_table_files(dir: &Path, name: &str, batches: &[RecordBatch]) -> String {
    let table = dir.join(name);
    std::fs::create_dir_all(&table).unwrap();
    for (i, batch) in batches.iter().enumerate() {
        write_parquet_file(
            table.join(format!("part-{i}.parquet")),
            batch.schema(),
            std::slice::from_ref(batch),
            &LakeWriterOptions::default(),
        )
        .unwrap();
    }
    format!("{}/", table.display())
}

/// A session placed as `placement` says, with `table` registered.
async fn session(placement: Placement, table: (&str, &str)) -> OxideSession {
    session_with(placement, &[], table).await
}

/// [`session`] with the `settings` (`SET` statements) run before `table` is registered.
async fn session_with(
    placement: Placement,
    settings: &[&str],
    (name, path): (&str, &str),
) -> OxideSession {
    let target = match placement {
        Placement::Cpu => PlacementTarget::Cpu,
        Placement::Cuda => PlacementTarget::Cuda,
    };
    let session = OxideSession::local_with(target, Arc::new(FixedProbe(BackendKind::CpuSimd)));
    for setting in settings {
        session.sql(setting).await.unwrap();
    }
    session.register_parquet(name, path).await.unwrap();
    session
}

/// Runs `sql`, which must fail with `expected`, and checks that a cuda placement ran
/// the device partial aggregate (reading device batches, for `reads_device_batches`).
async fn assert_overflow(
    session: &OxideSession,
    placement: Placement,
    sql: &str,
    expected: &str,
    reads_device_batches: bool,
) {
    let plan = session.explain(sql).await.unwrap();
    if placement != Placement::Cpu {
        assert!(
            plan.contains("GpuPartialAggregateExec[cuda]"),
            "{placement:?}: {sql}\n{plan}"
        );
    }
    if placement == Placement::Cuda && reads_device_batches {
        assert!(
            plan.contains("input=device"),
            "{placement:?}: the partial aggregate reads device batches: {sql}\n{plan}"
        );
    }
    let err = session.sql(sql).await.expect_err(sql).to_string();
    assert!(err.contains(expected), "{placement:?}: {sql}: {err}");
}

#[tokio::test]
async fn sum_of_int64_values_past_i64_max_is_an_error_on_every_placement() {
    let dir = tempfile::tempdir().unwrap();
    // Group 1 sums to i64::MAX + 10 (DataFusion's sum said -9223372036854775799).
    let batch = RecordBatch::try_from_iter([
        (
            "g",
            Arc::new(Int64Array::from(vec![1, 1, 2, 2])) as ArrayRef,
        ),
        (
            "i",
            Arc::new(Int64Array::from(vec![i64::MAX - 10, 20, 5, 6])) as ArrayRef,
        ),
    ])
    .unwrap();
    let path = write_table(dir.path(), "ints", &batch);
    let expected = "Arithmetic overflow: SUM over Int64 exceeds its range";
    for placement in PLACEMENTS {
        let session = session(placement, ("ints", path.as_str())).await;
        let grouped = "SELECT g, SUM(i) FROM ints WHERE g >= 0 GROUP BY g";
        assert_overflow(&session, placement, grouped, expected, true).await;
        let whole = "SELECT SUM(i) FROM ints WHERE g >= 0";
        assert_overflow(&session, placement, whole, expected, false).await;
        // Within the range the sums are exact, a sum just under the top included.
        let rows = session
            .sql("SELECT g, SUM(i) FROM ints WHERE i <> 20 GROUP BY g")
            .await
            .unwrap();
        assert_eq!(
            sorted_rows(&rows),
            [format!("1|{}", i64::MAX - 10), "2|11".to_string()],
            "{placement:?}"
        );
    }
}

#[tokio::test]
async fn sum_over_decimals_that_overflow_38_digits_is_an_error_on_every_placement() {
    let dir = tempfile::tempdir().unwrap();
    // Group 1: 9·10^37 twice, past i128::MAX (DataFusion's sum wrapped it to a negative
    // number). Group 2: 6·10^37 twice, which an i128 holds and 38 digits do not.
    let (nine, six) = (9 * 10i128.pow(37), 6 * 10i128.pow(37));
    let d = Decimal128Array::from(vec![nine, nine, six, six, 1, 2])
        .with_precision_and_scale(38, 0)
        .unwrap();
    let batch = RecordBatch::try_from_iter([
        (
            "g",
            Arc::new(Int64Array::from(vec![1, 1, 2, 2, 3, 3])) as ArrayRef,
        ),
        ("d", Arc::new(d) as ArrayRef),
    ])
    .unwrap();
    let path = write_table(dir.path(), "decimals", &batch);
    let expected = "Arithmetic overflow: SUM over Decimal128(38, 0) exceeds its range";
    for placement in PLACEMENTS {
        let session = session(placement, ("decimals", path.as_str())).await;
        for sql in [
            "SELECT g, SUM(d) FROM decimals WHERE g = 1 GROUP BY g",
            "SELECT g, SUM(d) FROM decimals WHERE g = 2 GROUP BY g",
            "SELECT SUM(d) FROM decimals WHERE g >= 0",
        ] {
            assert_overflow(&session, placement, sql, expected, false).await;
        }
        let rows = session
            .sql("SELECT g, SUM(d) FROM decimals WHERE g = 3 GROUP BY g")
            .await
            .unwrap();
        assert_eq!(sorted_rows(&rows), ["3|3"], "{placement:?}");
    }
}

#[tokio::test]
async fn a_sum_whose_partial_sums_leave_int64_but_whose_total_fits_is_exact_on_every_placement() {
    let dir = tempfile::tempdir().unwrap();
    // Two files, read as two partitions. Group 1 sums to 2·i64::MAX + 1 in the first (past
    // the top) and to 2·i64::MIN − 3 in the second (past the bottom); its total, −4, fits.
    // The partial aggregate placed for cpu used to raise the overflow error on its own
    // partition's sum, while the device partial handed the rows on and answered −4.
    let file = |values: [i64; 4]| {
        RecordBatch::try_from_iter([
            (
                "g",
                Arc::new(Int64Array::from(vec![1, 1, 1, 2])) as ArrayRef,
            ),
            ("i", Arc::new(Int64Array::from(values.to_vec())) as ArrayRef),
        ])
        .unwrap()
    };
    let path = write_table_files(
        dir.path(),
        "mixed",
        &[
            file([i64::MAX, i64::MAX, 1, 5]),
            file([i64::MIN, i64::MIN, -3, 6]),
        ],
    );
    let grouped = "SELECT g, SUM(i) FROM mixed WHERE g >= 0 GROUP BY g";
    let whole = "SELECT SUM(i) FROM mixed WHERE g >= 0";
    for placement in PLACEMENTS {
        let partitions = ["SET datafusion.execution.target_partitions = 2"];
        let session = session_with(placement, &partitions, ("mixed", path.as_str())).await;
        let plan = session.explain(grouped).await.unwrap();
        assert!(
            plan.contains("file_groups={2 groups"),
            "{placement:?}: each file is a partition of its own\n{plan}"
        );
        if placement == Placement::Cpu {
            assert!(
                plan.contains("AggregateExec: mode=Partial"),
                "{placement:?}: partial sums per partition\n{plan}"
            );
        } else {
            assert!(
                plan.contains("GpuPartialAggregateExec[cuda]") && plan.contains("input=device"),
                "{placement:?}: the device partial aggregate reads device batches\n{plan}"
            );
        }
        let rows = session.sql(grouped).await.unwrap();
        assert_eq!(sorted_rows(&rows), ["1|-4", "2|11"], "{placement:?}");
        let rows = session.sql(whole).await.unwrap();
        assert_eq!(sorted_rows(&rows), ["7"], "{placement:?}");
    }
}
