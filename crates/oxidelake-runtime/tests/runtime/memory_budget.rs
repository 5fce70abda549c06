//! The host memory budget in the query path: a limit below what a query holds makes
//! DataFusion's operators spill and ours fail typed, the results stay exact, and the
//! telemetry hub sees the pool and the spills.

use datafusion::error::DataFusionError;
use oxidelake_core::{EngineError, TelemetryHub};
use oxidelake_runtime::memory::{HostBudget, PoolKind};

use oxidelake_runtime::cli::tpch::tpch_query;

use super::data::{sorted_rows, tpch_lake};

/// One group per order (150 000 at SF 0.1): the final aggregate's state is what spills.
const PER_ORDER: &str = "SELECT l_orderkey, SUM(l_quantity) AS q, COUNT(*) AS n, \
     MAX(l_extendedprice) AS m FROM lineitem GROUP BY l_orderkey";

fn limit(bytes: usize) -> HostBudget {
    HostBudget {
        memory_limit: Some(bytes),
        pool: PoolKind::Fair,
        disk_limit: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregate_holding_four_times_the_memory_limit_spills_and_returns_the_unlimited_result()
{
    let (_dir, session) = tpch_lake(0.1).await;
    let (unlimited, spills) = session.sql_with_spills(PER_ORDER).await.unwrap();
    assert_eq!(spills.files, 0, "no limit, no spill");
    let peak = session.host_memory().unwrap().peak;
    assert!(peak > 0, "the pool saw the query's reservations");

    let budget = peak / 4;
    session.set_host_budget(&limit(budget)).unwrap();
    let demotions_before = TelemetryHub::global().snapshot().spill.demotions;
    let (limited, spills) = session.sql_with_spills(PER_ORDER).await.unwrap();
    assert_eq!(sorted_rows(&limited), sorted_rows(&unlimited));
    assert!(
        spills.files > 0 && spills.bytes > 0,
        "{spills:?} under {budget} of {peak} bytes"
    );
    let memory = session.host_memory().unwrap();
    assert_eq!(memory.limit, Some(budget));
    // Operators may `grow` past a limit by a little (infallible reservations), so the
    // check is that the limit held the query well below what it took without one.
    assert!(
        memory.peak < peak / 2,
        "{memory:?} against an unlimited peak of {peak}"
    );
    assert!(
        TelemetryHub::global().snapshot().spill.demotions >= demotions_before + spills.files,
        "the hub counts the spill files"
    );
}

/// The text of `EXPLAIN ANALYZE query` (the query runs).
async fn explain_analyze(session: &oxidelake_runtime::OxideSession, query: &str) -> String {
    let analyzed = session
        .sql(&format!("EXPLAIN ANALYZE {query}"))
        .await
        .unwrap();
    arrow::util::pretty::pretty_format_batches(&analyzed)
        .unwrap()
        .to_string()
}

/// Spill files written by the `GraceHashJoinExec` lines of an EXPLAIN ANALYZE.
fn grace_join_spill_files(analyzed: &str) -> u64 {
    grace_join_metric(analyzed, "spill_count")
}

/// The sum of metric `name` over the `GraceHashJoinExec` lines of an EXPLAIN ANALYZE.
fn grace_join_metric(analyzed: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    analyzed
        .lines()
        .filter(|line| line.contains("GraceHashJoinExec"))
        .filter_map(|line| {
            let at = line.find(&key)? + key.len();
            let digits: String = line[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().ok()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q18_holding_four_times_the_memory_limit_spills_its_joins_and_returns_the_unlimited_result()
 {
    let (_dir, session) = tpch_lake(0.1).await;
    // Join filters (JoinFilterExec, and the scans' pruning by them) cut Q18's lineitem
    // rows to the few orders its semi join keeps, and then what the query holds depends
    // on when each filter is filled. The test is about the spilling joins, so they see
    // every row, as before the filters existed.
    session
        .sql("SET datafusion.optimizer.enable_join_dynamic_filter_pushdown = false")
        .await
        .unwrap();
    let q18 = tpch_query(18, 0.1).unwrap().join(";\n");
    let (unlimited, _) = session.sql_with_spills(&q18).await.unwrap();
    assert!(!unlimited.is_empty());
    let peak = session.host_memory().unwrap().peak;

    let budget = peak / 4;
    session.set_host_budget(&limit(budget)).unwrap();
    let plan = session.explain(&q18).await.unwrap();
    assert!(plan.contains("GraceHashJoinExec"), "{plan}");
    let (limited, spills) = session.sql_with_spills(&q18).await.unwrap();
    assert_eq!(sorted_rows(&limited), sorted_rows(&unlimited));
    assert!(
        spills.files > 0,
        "{spills:?} under {budget} of {peak} bytes"
    );

    // The joins themselves spilled, not only the aggregates.
    let text = explain_analyze(&session, &q18).await;
    assert!(grace_join_spill_files(&text) > 0, "{text}");
}

/// Placed for cuda under a host limit, TPC-H Q18's joins run their pairs on the device,
/// and a device limit a fraction of their build sides splits them until each part fits.
/// On this machine the GPU join runs its CPU path; `scripts/test-cuda-emulated.sh` runs
/// this test again with `OXIDE_BACKEND=cuda`, where the parts go to the emulated device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q18_split_for_the_device_demotes_its_parts_to_disk_past_its_share_of_a_small_pool() {
    let (_dir, session) = tpch_lake(0.1).await;
    let q18 = tpch_query(18, 0.1).unwrap().join(";\n");
    let (unlimited, _) = session.sql_with_spills(&q18).await.unwrap();
    // A pool with room for what a build side collects before the device limit stops
    // it, but not for both sides' parts in its host tier (half of the free bytes).
    session.set_host_budget(&limit(48 << 20)).unwrap();
    session
        .sql("SET oxidelake.memory.device_limit = '4M'")
        .await
        .unwrap();
    let (limited, spills) = session.sql_with_spills(&q18).await.unwrap();
    assert_eq!(sorted_rows(&limited), sorted_rows(&unlimited));
    assert!(spills.held_in_host_bytes > 0, "{spills:?}");
    assert!(spills.files > 0, "{spills:?}");
    let text = explain_analyze(&session, &q18).await;
    assert!(
        grace_join_metric(&text, "device_budget_splits") > 0,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q18_under_a_small_device_limit_joins_its_parts_on_the_device_with_the_unlimited_result()
 {
    let (_dir, session) = tpch_lake(0.1).await;
    let q18 = tpch_query(18, 0.1).unwrap().join(";\n");
    let (unlimited, _) = session.sql_with_spills(&q18).await.unwrap();
    assert!(!unlimited.is_empty());

    // A host limit well above the query's needs turns the spilling joins on; the device
    // limit is what splits them.
    session.set_host_budget(&limit(1 << 30)).unwrap();
    session
        .sql("SET oxidelake.memory.device_limit = '8M'")
        .await
        .unwrap();
    let plan = session.explain(&q18).await.unwrap();
    assert!(
        plan.contains("pairs=GpuHashJoinExec[cuda], device_limit=8388608"),
        "{plan}"
    );
    let on_device = std::env::var("OXIDE_BACKEND").is_ok_and(|b| b == "cuda");
    let uploaded = TelemetryHub::global().snapshot().transfers.h2d_bytes;
    let (limited, spills) = session.sql_with_spills(&q18).await.unwrap();
    assert_eq!(sorted_rows(&limited), sorted_rows(&unlimited));
    // The pool had room: the split parts waited in host memory, not on disk.
    assert!(spills.held_in_host_bytes > 0, "{spills:?}");
    assert_eq!(spills.files, 0, "{spills:?}");
    if on_device {
        assert!(
            TelemetryHub::global().snapshot().transfers.h2d_bytes > uploaded,
            "the pairs' joins copied their rows to the device"
        );
    }

    let text = explain_analyze(&session, &q18).await;
    assert!(
        grace_join_metric(&text, "device_budget_splits") > 0,
        "{text}"
    );
    assert!(grace_join_metric(&text, "held_in_host_bytes") > 0, "{text}");
    assert_eq!(grace_join_spill_files(&text), 0, "{text}");
    // The pair joins' metrics say where they ran: on the emulated device, not on the
    // CPU path of a GPU join that found no device.
    assert!(text.contains("no_device="), "{text}");
    if on_device {
        assert_eq!(grace_join_metric(&text, "no_device"), 0, "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_join_build_side_beyond_the_memory_limit_fails_typed_and_names_the_join() {
    let (_dir, session) = tpch_lake(0.1).await;
    let join = "SELECT COUNT(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey";
    let plan = session.explain(join).await.unwrap();
    assert!(plan.contains("GpuHashJoinExec"), "{plan}");
    session.set_host_budget(&limit(1 << 20)).unwrap();
    // A memory limit turns on the spilling join, which runs on the CPU; this test is
    // about the GPU join's own reservations, so it turns that off again.
    session
        .sql("SET oxidelake.memory.spill_joins = false")
        .await
        .unwrap();
    assert!(
        session
            .explain(join)
            .await
            .unwrap()
            .contains("GpuHashJoinExec")
    );
    let err = session.sql(join).await.unwrap_err();
    let EngineError::DataFusion(inner) = &err else {
        panic!("expected a DataFusion error, got {err:?}");
    };
    assert!(
        matches!(inner.find_root(), DataFusionError::ResourcesExhausted(_)),
        "{err}"
    );
    assert!(err.to_string().contains("GpuHashJoinExec"), "{err}");
    // Released on failure: once the query's other tasks are torn down (asynchronously,
    // after the first error came back) the pool holds nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while session.host_memory().unwrap().reserved != 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(session.host_memory().unwrap().reserved, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_memory_limit_in_sql_keeps_the_pool_visible_to_telemetry() {
    let (_dir, session) = tpch_lake(0.1).await;
    session
        .sql("SET datafusion.runtime.memory_limit = '64M'")
        .await
        .unwrap();
    let memory = session.host_memory().expect("the new pool is wrapped");
    assert_eq!(memory.limit, Some(64 << 20));
    session.sql(PER_ORDER).await.unwrap();
    assert!(session.host_memory().unwrap().peak > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_memory_limit_in_sql_turns_on_the_spilling_join() {
    let (_dir, session) = tpch_lake(0.1).await;
    let join = "SELECT COUNT(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey";
    let plan = session.explain(join).await.unwrap();
    assert!(!plan.contains("GraceHashJoinExec"), "no limit yet: {plan}");
    session
        .sql("SET datafusion.runtime.memory_limit = '64M'")
        .await
        .unwrap();
    let plan = session.explain(join).await.unwrap();
    assert!(plan.contains("GraceHashJoinExec"), "{plan}");
}

/// The query of apache/datafusion#24883: on DataFusion 55.2 a stock session runs it under
/// a 2 MiB limit until, within a few runs, two input tasks of a `RepartitionExec` spill at
/// once and the query never returns (every thread parked). A session keeps its
/// repartitions off that spill path (`RepartitionGrantPool`), so every run completes with
/// the exact answer, with a deadline on each run turning a hang into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repartitions_under_a_small_memory_limit_do_not_deadlock_on_their_spill_pool() {
    let session = oxidelake_runtime::OxideSession::local();
    for setup in [
        "SET datafusion.execution.target_partitions = 2",
        "SET datafusion.execution.batch_size = 64",
        "CREATE TABLE t AS SELECT v % 13 AS g, md5(CAST(v % 337 AS VARCHAR)) AS trace_id \
         FROM generate_series(1, 40000) AS s(v)",
        "SET datafusion.runtime.memory_limit = '2M'",
    ] {
        session.sql(setup).await.unwrap();
    }
    let query = "SELECT g, COUNT(DISTINCT trace_id) AS n FROM t GROUP BY g";
    for run in 0..12 {
        let batches = tokio::time::timeout(std::time::Duration::from_secs(60), session.sql(query))
            .await
            .unwrap_or_else(|_| panic!("run {run} did not return within 60 s: deadlocked"))
            .unwrap();
        // 13 and 337 are coprime: every group sees every one of the 337 trace ids.
        let rows = sorted_rows(&batches);
        assert_eq!(rows.len(), 13, "run {run}: {rows:?}");
        assert!(
            rows.iter().all(|row| row.ends_with("337")),
            "run {run}: {rows:?}"
        );
    }
}
