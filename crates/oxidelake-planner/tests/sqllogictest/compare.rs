//! Stock against placed, record by record.
//!
//! A record that passes stock and fails placed is a **regression**, with two exceptions
//! that differ by design and are counted apart: an `EXPLAIN` whose rows differ (the plan
//! text names `Gpu*` operators), and a settings listing whose rows differ by the
//! `oxidelake.*` option the placed session carries. An `EXPLAIN` that errors is still a
//! regression. A query whose rows are the expected ones in another order is listed
//! apart and printed in full: SQL leaves that order open where the query has no ORDER
//! BY, or ties under it, and docs/sqllogictest.md says for each one which it is. Records that fail stock (most read DataFusion's repository data, which
//! the crate does not ship) are counted and not compared.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use super::file_run::{FileRun, Outcome, RecordOutcome};

/// The counts over every file run so far, and the regressions found.
#[derive(Debug, Default)]
pub struct Summary {
    pub files: usize,
    pub skipped_files: usize,
    pub timed_out_files: usize,
    pub records: usize,
    pub passed_stock: usize,
    pub passed_both: usize,
    pub placed_passing: usize,
    pub plan_text_only: usize,
    pub settings_only: usize,
    pub order_only: Vec<String>,
    pub regressions: Vec<String>,
    rows: Vec<String>,
}

impl Summary {
    /// Adds one file's two runs; returns the file's line for the console.
    pub fn add(&mut self, relative: &Path, stock: &FileRun, placed: &FileRun) -> String {
        let name = relative.display().to_string();
        self.files += 1;
        let (stock, placed, timed_out) = match (stock, placed) {
            (FileRun::Skipped(why), _) | (_, FileRun::Skipped(why)) => {
                self.skipped_files += 1;
                let line = format!("{name}: skipped ({why})");
                self.rows
                    .push(format!("| {name} | skipped: {why} | | | | |"));
                return line;
            }
            (
                FileRun::Ran {
                    records: s,
                    timed_out: ts,
                },
                FileRun::Ran {
                    records: p,
                    timed_out: tp,
                },
            ) => (s, p, *ts || *tp),
        };
        if timed_out {
            self.timed_out_files += 1;
        }
        let mut file = Counts::default();
        for (s, p) in stock.iter().zip(placed) {
            file.add(s, p, &mut self.regressions, &mut self.order_only);
        }
        self.records += file.records;
        self.passed_stock += file.passed_stock;
        self.passed_both += file.passed_both;
        self.placed_passing += file.placed_passing;
        self.plan_text_only += file.plan_text_only;
        self.settings_only += file.settings_only;
        let note = if timed_out { " (timed out)" } else { "" };
        self.rows.push(format!(
            "| {name}{note} | {} | {} | {} | {} | {} |",
            file.records,
            file.passed_stock,
            file.passed_both,
            file.placed_passing,
            file.regressions
        ));
        format!(
            "{name}{note}: {} records, {} pass stock, {} pass placed too, {} of those on GPU operators, {} regressions",
            file.records,
            file.passed_stock,
            file.passed_both,
            file.placed_passing,
            file.regressions
        )
    }

    /// The closing console line.
    pub fn totals(&self, took: Duration) -> String {
        format!(
            "sqllogictest: {} files ({} skipped, {} timed out), {} records, {} pass stock, \
             {} pass placed too ({} on GPU operators), {} EXPLAIN records differ in plan text, \
             {} settings listings differ by the oxidelake option, {} return the same rows in \
             another order, {} regressions, {:.0} s",
            self.files,
            self.skipped_files,
            self.timed_out_files,
            self.records,
            self.passed_stock,
            self.passed_both,
            self.placed_passing,
            self.plan_text_only,
            self.settings_only,
            self.order_only.len(),
            self.regressions.len(),
            took.as_secs_f64()
        )
    }

    /// The report: the totals and a row per file.
    pub fn markdown(&self, took: Duration) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}\n", self.totals(took));
        let _ = writeln!(
            out,
            "| file | records | pass stock | pass placed too | of those on GPU operators | regressions |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for row in &self.rows {
            let _ = writeln!(out, "{row}");
        }
        out
    }
}

#[derive(Debug, Default)]
struct Counts {
    records: usize,
    passed_stock: usize,
    passed_both: usize,
    placed_passing: usize,
    plan_text_only: usize,
    settings_only: usize,
    regressions: usize,
}

impl Counts {
    fn add(
        &mut self,
        stock: &RecordOutcome,
        placed: &RecordOutcome,
        found: &mut Vec<String>,
        reordered: &mut Vec<String>,
    ) {
        self.records += 1;
        if !matches!(stock.outcome, Outcome::Passed) {
            return;
        }
        self.passed_stock += 1;
        match &placed.outcome {
            Outcome::Passed => {
                self.passed_both += 1;
                if placed.placed {
                    self.placed_passing += 1;
                }
            }
            Outcome::Mismatch { .. } if placed.explain => self.plan_text_only += 1,
            Outcome::Mismatch { actual, .. } if actual.contains("oxidelake.") => {
                self.settings_only += 1
            }
            Outcome::Mismatch {
                same_rows: true,
                message,
                ..
            } => reordered.push(format!(
                "SAME ROWS, OTHER ORDER at {} (the file expects stock's order):\n{message}",
                placed.location
            )),
            Outcome::Mismatch { message, .. } | Outcome::Failed { message } => {
                self.regressions += 1;
                found.push(format!(
                    "REGRESSION at {} (passes stock, fails placed for cuda):\n{message}",
                    placed.location
                ));
            }
        }
    }
}
