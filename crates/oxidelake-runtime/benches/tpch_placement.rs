//! What placing for CUDA costs on a machine without a GPU: the 22 TPC-H queries on one
//! Parquet lake, on a session placing for the CPU (stock DataFusion operators) and on one
//! placing for CUDA whose detector reports no GPU (the GPU operators' CPU paths — what a
//! heterogeneous cluster's CPU executors run).
//!
//! Each query runs once per session as a warm-up, then `OXIDE_BENCH_RUNS` (default 3)
//! timed times per session, the two sessions alternating so that the machine's noise
//! falls on both. It prints the median of each query per session, the totals of the
//! medians and their ratio, as a Markdown table (docs/benchmarks.md has the results).
//!
//! ```sh
//! OXIDE_TPCH_SF=1 OXIDE_TPCH_DIR=$HOME/.cache/oxidelake/tpch-sf1 \
//!   cargo bench --workspace --bench tpch_placement
//! ```
//! The lake is generated into `OXIDE_TPCH_DIR` (default: a folder under the system's
//! temporary directory named after the scale factor) when it has no `lineitem` yet.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oxidelake_core::BackendKind;
use oxidelake_planner::{FixedProbe, PlacementTarget};
use oxidelake_runtime::OxideSession;
use oxidelake_runtime::cli::gen_data::generate_tpch;
use oxidelake_runtime::cli::tables::register_data_dir;
use oxidelake_runtime::cli::tpch::tpch_query;
use oxidelake_storage::LakeWriterOptions;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn session(target: PlacementTarget, lake: &std::path::Path) -> OxideSession {
    // The detector reports this machine as it is: no GPU, so GPU operators run their
    // CPU paths.
    let session = OxideSession::local_with(target, Arc::new(FixedProbe(BackendKind::CpuSimd)));
    register_data_dir(&session, lake).await.unwrap();
    session
}

/// Runs every statement of the query (Q15 is three) and returns the time taken.
async fn run(session: &OxideSession, statements: &[String]) -> Duration {
    let started = Instant::now();
    for statement in statements {
        session.sql(statement).await.unwrap();
    }
    started.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument picks queries ("6" or "1,6,18").
    let picked: Option<Vec<i32>> = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.split(',').filter_map(|q| q.parse().ok()).collect());
    let sf: f64 = env_or("OXIDE_TPCH_SF", 1.0);
    let runs: usize = env_or("OXIDE_BENCH_RUNS", 3).max(1);
    let lake = std::env::var_os("OXIDE_TPCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("oxidelake-tpch-sf{sf}")));
    if !lake.join("lineitem").exists() {
        eprintln!("generating TPC-H SF {sf} into {}", lake.display());
        std::fs::create_dir_all(&lake).unwrap();
        generate_tpch(&lake, sf, &LakeWriterOptions::default()).unwrap();
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cpu = session(PlacementTarget::Cpu, &lake).await;
        let cuda = session(PlacementTarget::Cuda, &lake).await;
        println!("TPC-H SF {sf}, {runs} timed runs per query and session, {threads} threads");
        println!();
        println!(
            "| query | --placement cpu | --placement cuda | cuda / cpu | GPU joins (partitioned) |"
        );
        println!("|---|---|---|---|---|");
        let (mut total_cpu, mut total_cuda) = (Duration::ZERO, Duration::ZERO);
        for query in 1..=22 {
            if picked.as_ref().is_some_and(|p| !p.contains(&query)) {
                continue;
            }
            let statements = tpch_query(query, sf).unwrap();
            run(&cpu, &statements).await;
            run(&cuda, &statements).await;
            let (mut on_cpu, mut on_cuda) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                on_cpu.push(run(&cpu, &statements).await);
                on_cuda.push(run(&cuda, &statements).await);
            }
            let (a, b) = (median(on_cpu), median(on_cuda));
            // The placed plan's GPU joins, and how many DataFusion partitioned (Q15's view
            // is created by its first statement: its plan is not explained here).
            let joins = if statements.len() == 1 {
                let plan = cuda.explain(&statements[0]).await.unwrap();
                let gpu = plan.matches("GpuHashJoinExec").count();
                let partitioned = plan
                    .lines()
                    .filter(|l| l.contains("GpuHashJoinExec") && l.contains("mode=Partitioned"))
                    .count();
                format!("{gpu} ({partitioned})")
            } else {
                "–".to_string()
            };
            total_cpu += a;
            total_cuda += b;
            println!(
                "| Q{query} | {:.0} ms | {:.0} ms | {:.2}× | {joins} |",
                a.as_secs_f64() * 1e3,
                b.as_secs_f64() * 1e3,
                b.as_secs_f64() / a.as_secs_f64()
            );
        }
        println!(
            "| **total** | **{:.2} s** | **{:.2} s** | **{:.2}×** | |",
            total_cpu.as_secs_f64(),
            total_cuda.as_secs_f64(),
            total_cuda.as_secs_f64() / total_cpu.as_secs_f64()
        );
    });
}
