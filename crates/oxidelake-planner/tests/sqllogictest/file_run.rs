//! One run of one `.slt` file through the `DataFusion` driver, record by record, keeping
//! each record's outcome (a failing record does not stop the file, as in DataFusion's
//! own runner with `--complete` off).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ::sqllogictest::{Record, Runner, TestErrorKind, parse_file, strict_column_validator};
use datafusion_sqllogictest::{
    DFColumnType, DFSqlLogicTestError, DataFusion, TestContext, df_value_validator,
    setup_scratch_dir, value_normalizer,
};
use indicatif::ProgressBar;

use super::session;
use super::suite::Suite;

/// How one record ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    Passed,
    /// The query ran and returned other rows than the file expects.
    Mismatch {
        actual: String,
        /// The same rows as expected, in another order.
        same_rows: bool,
        message: String,
    },
    /// Anything else: an error, an unexpected error text, a wrong column count.
    Failed {
        message: String,
    },
}

/// One statement or query of a file.
#[derive(Debug, Clone)]
pub struct RecordOutcome {
    /// `file:line`, the place to look it up.
    pub location: String,
    /// An `EXPLAIN …` record: its expected rows are plan text.
    pub explain: bool,
    pub outcome: Outcome,
    /// Whether a plan planned for this record had a GPU operator in it.
    pub placed: bool,
}

/// How one run of a file ended.
#[derive(Debug)]
pub enum FileRun {
    /// The `TestContext` declines the file (a feature it needs is not built).
    Skipped(String),
    /// The records run, in file order; `timed_out` when the run stopped at the deadline.
    Ran {
        records: Vec<RecordOutcome>,
        timed_out: bool,
    },
}

/// Runs `relative` (a path under `test_files/`) stock, or with the placement rule when
/// `placed`.
pub async fn run_file(suite: &Suite, relative: &Path, placed: bool, limit: Duration) -> FileRun {
    let Some(test_ctx) = TestContext::try_new_for_test_file(relative).await else {
        return FileRun::Skipped("the TestContext skips it".into());
    };
    if let Err(e) = setup_scratch_dir(relative) {
        return FileRun::Skipped(format!("no scratch directory: {e}"));
    }
    let counter = placed.then(|| session::place_for_cuda(test_ctx.session_ctx()));
    let records = match parse_file::<DFColumnType>(suite.test_files.join(relative)) {
        Ok(records) => records,
        Err(e) => return FileRun::Skipped(format!("does not parse: {e}")),
    };
    let mut runner = Runner::new(|| async {
        Ok::<_, DFSqlLogicTestError>(DataFusion::new(
            test_ctx.session_ctx().clone(),
            relative.to_path_buf(),
            ProgressBar::hidden(),
        ))
    });
    runner.add_label("Datafusion");
    runner.with_column_validator(strict_column_validator);
    runner.with_normalizer(value_normalizer);
    runner.with_validator(df_value_validator);

    let deadline = Instant::now() + limit;
    let mut outcomes = Vec::new();
    let mut timed_out = false;
    for record in records {
        let (location, explain) = match &record {
            Record::Halt { .. } => break,
            Record::Statement { loc, sql, .. } | Record::Query { loc, sql, .. } => {
                (loc.to_string(), is_explain(sql))
            }
            _ => {
                // Control records (`statement` conditions, `control`, `subtest`) keep the
                // runner's state; their outcome is not a record of its own.
                let _ = runner.run_async(record).await;
                continue;
            }
        };
        let before = counter.as_ref().map(|c| c.load(Ordering::Relaxed));
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok(result) = tokio::time::timeout(remaining, runner.run_async(record)).await else {
            timed_out = true;
            break;
        };
        let after = counter.as_ref().map(|c| c.load(Ordering::Relaxed));
        let outcome = match result {
            Ok(_) => Outcome::Passed,
            Err(e) => match e.kind() {
                TestErrorKind::QueryResultMismatch {
                    actual, expected, ..
                } => Outcome::Mismatch {
                    same_rows: same_rows(&expected, &actual),
                    actual,
                    message: e.to_string(),
                },
                _ => Outcome::Failed {
                    message: e.to_string(),
                },
            },
        };
        outcomes.push(RecordOutcome {
            location,
            explain,
            outcome,
            placed: before != after,
        });
    }
    runner.shutdown_async().await;
    FileRun::Ran {
        records: outcomes,
        timed_out,
    }
}

/// Whether two result texts hold the same lines, in any order.
fn same_rows(expected: &str, actual: &str) -> bool {
    let sorted = |text: &str| {
        let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
        lines.sort();
        lines
    };
    sorted(expected) == sorted(actual)
}

fn is_explain(sql: &str) -> bool {
    sql.trim_start()
        .get(..7)
        .is_some_and(|head| head.eq_ignore_ascii_case("explain"))
}
