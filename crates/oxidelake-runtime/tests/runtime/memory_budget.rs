//! The host memory budget in the query path: a limit below what a query holds makes
//! DataFusion's operators spill and ours fail typed, the results stay exact, and the
//! telemetry hub sees the pool and the spills.

use datafusion::error::DataFusionError;
use oxidelake_core::{EngineError, TelemetryHub};
use oxidelake_runtime::memory::{HostBudget, PoolKind};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_join_build_side_beyond_the_memory_limit_fails_typed_and_names_the_join() {
    let (_dir, session) = tpch_lake(0.1).await;
    let join = "SELECT COUNT(*) FROM orders JOIN lineitem ON o_orderkey = l_orderkey";
    let plan = session.explain(join).await.unwrap();
    assert!(plan.contains("GpuHashJoinExec"), "{plan}");
    session.set_host_budget(&limit(1 << 20)).unwrap();
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
