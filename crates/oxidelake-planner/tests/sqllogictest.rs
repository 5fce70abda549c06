//! DataFusion's own sqllogictest files, as shipped in the `datafusion-sqllogictest`
//! crate, each run twice through that crate's `DataFusion` driver: on the session its
//! `TestContext` builds (stock), and on the same session with the placement rule placing
//! for cuda (the GPU operators' CPU paths on a machine without a GPU). A record that
//! passes stock and fails placed is a regression; the run exits 1 and prints each one.
//!
//! This is its own `main` (`harness = false`):
//!
//! ```text
//! cargo test --workspace --test sqllogictest                       # the CI subset
//! cargo test --workspace --test sqllogictest -- --all              # every file
//! cargo test --workspace --test sqllogictest -- joins.slt order    # files by name
//! cargo test --workspace --test sqllogictest -- --all --report slt.md
//! ```
//!
//! docs/sqllogictest.md explains the classification and records the full run.

#![allow(clippy::expect_used, missing_docs)]

mod sqllogictest {
    pub mod args;
    pub mod compare;
    pub mod file_run;
    pub mod session;
    pub mod suite;
}

use std::process::ExitCode;
use std::time::Instant;

use sqllogictest::{args::Args, compare, file_run, suite};

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    if args.nothing_to_run {
        // `cargo test --workspace -- --ignored …` reaches every test binary; this one
        // has no ignored records.
        return ExitCode::SUCCESS;
    }
    let suite = match suite::Suite::prepare() {
        Ok(suite) => suite,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    let files = suite.select(&args);
    if files.is_empty() {
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the sqllogictest files");
    let started = Instant::now();
    let mut summary = compare::Summary::default();
    for relative in &files {
        let stock = runtime.block_on(file_run::run_file(&suite, relative, false, args.timeout));
        let placed = runtime.block_on(file_run::run_file(&suite, relative, true, args.timeout));
        let line = summary.add(relative, &stock, &placed);
        println!("{line}");
    }
    println!("{}", summary.totals(started.elapsed()));
    if let Some(path) = &args.report
        && let Err(e) = std::fs::write(path, summary.markdown(started.elapsed()))
    {
        eprintln!("error: cannot write the report {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    for reordered in &summary.order_only {
        println!("{reordered}");
    }
    if summary.regressions.is_empty() {
        ExitCode::SUCCESS
    } else {
        for regression in &summary.regressions {
            eprintln!("{regression}");
        }
        ExitCode::FAILURE
    }
}
