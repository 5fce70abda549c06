//! The filters hash joins learn from their build sides drop probe rows right above the
//! Parquet scans (`JoinFilterRowsRule`, `JoinFilterExec`) while that pays, and the
//! query's rows stay the same.

use std::sync::Arc;

use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use oxidelake_compute::JoinFilterExec;
use oxidelake_runtime::OxideSession;

use super::data::{metric_sum, run_plan as run, tpch_lake};

/// Q17's join: 20 parts of 20,000 at SF 0.1 match, so about 600 of 600,000 lineitem
/// rows can join.
const PART_JOIN: &str = "SELECT COUNT(*) AS n, SUM(l_extendedprice) AS s FROM lineitem, part \
     WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'";

/// Rows of lineitem at SF 0.1.
const LINEITEM_ROWS: usize = 600_572;

/// Output rows of the plan's `JoinFilterExec` nodes over a lineitem scan, and of the
/// lineitem scans themselves, once `plan` has run (`None`: no such node).
fn lineitem_rows(plan: &Arc<dyn ExecutionPlan>) -> (Option<usize>, usize) {
    let mut filtered = None;
    let mut scanned = 0;
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        let line = displayable(node.as_ref()).one_line().to_string();
        let reads_lineitem = displayable(node.as_ref())
            .indent(false)
            .to_string()
            .contains("lineitem/");
        let output_rows = || node.metrics().and_then(|m| m.output_rows()).unwrap_or(0);
        if node.downcast_ref::<JoinFilterExec>().is_some() && reads_lineitem {
            *filtered.get_or_insert(0) += output_rows();
        }
        if node.downcast_ref::<DataSourceExec>().is_some() && line.contains("lineitem/") {
            scanned += output_rows();
        }
        stack.extend(node.children().into_iter().cloned());
    }
    (filtered, scanned)
}

/// The sum of metric `name` over the plan's `JoinFilterExec` nodes.
fn join_filter_metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    metric_sum(plan, |n| n.downcast_ref::<JoinFilterExec>().is_some(), name)
}

/// The shared SF 0.1 lake in a session placed for `placement`.
async fn session(placement: &str) -> (super::data::GeneratedData, OxideSession) {
    let (dir, session) = tpch_lake(0.1).await;
    session
        .sql(&format!("SET oxidelake.placement.target = '{placement}'"))
        .await
        .unwrap();
    (dir, session)
}

/// [`session`] placed for the CPU.
async fn cpu_session() -> (super::data::GeneratedData, OxideSession) {
    session("cpu").await
}

/// [`cpu_session`] with every hash join in Partitioned mode.
async fn partitioned_cpu_session() -> (super::data::GeneratedData, OxideSession) {
    let (dir, session) = cpu_session().await;
    for setting in [
        "datafusion.optimizer.hash_join_single_partition_threshold",
        "datafusion.optimizer.hash_join_single_partition_threshold_rows",
    ] {
        session.sql(&format!("SET {setting} = 0")).await.unwrap();
    }
    (dir, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_joins_filter_drops_the_probe_rows_it_excludes_above_the_scan() {
    let (_dir, session) = cpu_session().await;
    let (filtered_rows, plan) = run(&session, PART_JOIN).await;
    let (filtered, scanned) = lineitem_rows(&plan);
    assert_eq!(scanned, LINEITEM_ROWS, "the scan reads every row");
    let filtered = filtered.expect("a JoinFilterExec over the lineitem scan");
    assert!(
        filtered * 100 < scanned,
        "the join's filter dropped the rows that cannot match: {filtered} of {scanned} left"
    );
    assert_eq!(join_filter_metric(&plan, "sampled_unselective"), 0);

    session
        .sql("SET oxidelake.scan.join_filter_rows = false")
        .await
        .unwrap();
    let (rows, plan) = run(&session, PART_JOIN).await;
    assert_eq!(
        lineitem_rows(&plan).0,
        None,
        "switched off: no JoinFilterExec"
    );
    assert_eq!(filtered_rows, rows, "the same answer either way");
}

/// Placed for cuda (the GPU join's CPU path on this machine; the same plan on a GPU),
/// the GPU join fills the dynamic filter from its build side as the stock join does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_placed_on_a_gpu_fills_its_filter_and_the_probe_rows_are_dropped_the_same_way() {
    let (_dir, session) = session("cuda").await;
    let (rows, plan) = run(&session, PART_JOIN).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("GpuHashJoinExec"), "{text}");
    let (filtered, scanned) = lineitem_rows(&plan);
    let filtered = filtered.expect("a JoinFilterExec over the lineitem scan");
    assert!(
        filtered * 100 < scanned,
        "the GPU join's filter dropped the rows that cannot match: {filtered} of {scanned} left"
    );
    let (_dir, cpu) = cpu_session().await;
    assert_eq!(run(&cpu, PART_JOIN).await.0, rows);
}

/// Q17's join with a filter and a computed column on the lineitem side: the GPU join's
/// filter passes through the `GpuFilterExec` above the lineitem scan (as DataFusion's
/// does through a `FilterExec`) and drops the rows there. Placed for the CPU it runs on
/// the GPU filter's rows (which leaves it fewer rows to check); placed for cuda it runs
/// on the scan, below the upload, so the rows it drops never cross to the device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joins_filter_reaches_the_scan_through_a_gpu_filter_on_the_probe_side() {
    let query = "SELECT COUNT(*) AS n, SUM(l_extendedprice * (1 - l_discount)) AS s \
                 FROM lineitem, part WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' \
                 AND p_container = 'MED BOX' AND l_quantity < 30";
    for target in ["cuda", "cpu"] {
        let (_dir, session) = session(target).await;
        if target == "cpu" {
            // Our filter on the CPU, as `cpu_operators` places it.
            session
                .sql("SET oxidelake.placement.cpu_operators = 'filter,projection'")
                .await
                .unwrap();
        }
        let (rows, plan) = run(&session, query).await;
        let text = displayable(plan.as_ref()).indent(true).to_string();
        assert!(text.contains("GpuFilterExec"), "{target}: {text}");
        let (filtered, scanned) = lineitem_rows(&plan);
        let filtered = filtered.expect("a JoinFilterExec over the lineitem scan");
        assert!(
            filtered * 100 < scanned,
            "{target}: the join's filter dropped the rows that cannot match: {filtered} of \
             {scanned} left"
        );
        let above = if target == "cuda" {
            "HostToDeviceExec"
        } else {
            "JoinFilterExec"
        };
        let below = if target == "cuda" {
            "JoinFilterExec"
        } else {
            "GpuFilterExec"
        };
        assert!(
            text.lines()
                .zip(text.lines().skip(1))
                .any(|(a, b)| a.contains(above) && b.contains(below)),
            "{target}: {below} right below {above}: {text}"
        );
        let (_dir, stock) = cpu_session().await;
        assert_eq!(run(&stock, query).await.0, rows, "{target}");
    }
}

/// TPC-H Q17 placed for cuda: the semi join's filter is on the group key of the GPU
/// partial aggregate over lineitem (`avg(l_quantity)` per part), so it passes through the
/// aggregate to the scan, as through the stock one, and the aggregate sees only the rows
/// of the parts that join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joins_filter_reaches_the_scan_through_a_gpu_partial_aggregate_on_its_group_key() {
    let query = oxidelake_runtime::cli::tpch::tpch_query(17, 0.1)
        .unwrap()
        .remove(0);
    let (_dir, session) = session("cuda").await;
    let (rows, plan) = run(&session, &query).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(
        text.contains("GpuPartialAggregateExec[cuda]: mode=Partial, gby=[l_partkey]"),
        "{text}"
    );
    let aggregated = metric_sum(&plan, |n| n.name() == "GpuPartialAggregateExec", "rows_in");
    assert!(
        aggregated * 10 < LINEITEM_ROWS,
        "the partial aggregates read {aggregated} rows: the join's filter stopped above them\n{text}"
    );
    let (_dir, cpu) = cpu_session().await;
    assert_eq!(run(&cpu, &query).await.0, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unselective_joins_filter_stops_filtering_after_its_sample() {
    let (_dir, session) = cpu_session().await;
    // Every order has lineitems, and half the orders pass: the filter would keep about
    // half of the lineitem rows.
    let query = "SELECT COUNT(*), SUM(l_quantity) FROM lineitem, orders \
         WHERE o_orderkey = l_orderkey AND o_orderkey % 2 = 0";
    let (rows, plan) = run(&session, query).await;
    let (filtered, scanned) = lineitem_rows(&plan);
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(filtered.is_some(), "{text}");
    assert!(
        join_filter_metric(&plan, "sampled_unselective") >= 1,
        "a partition saw that the filter keeps most rows and stopped: {text}"
    );
    assert!(
        join_filter_metric(&plan, "rows_checked") < scanned,
        "rows after the sample were not checked"
    );
    session
        .sql("SET oxidelake.scan.join_filter_rows = false")
        .await
        .unwrap();
    assert_eq!(run(&session, query).await.0, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_joins_filter_is_skipped_by_default_with_the_same_answer() {
    // Every join Partitioned: its filter is a CASE over the partitions' hash tables.
    let (_dir, session) = partitioned_cpu_session().await;
    let query = "SELECT COUNT(*), SUM(l_quantity) FROM lineitem, orders \
         WHERE o_orderkey = l_orderkey AND o_orderkey % 2 = 0";
    let (rows, plan) = run(&session, query).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("mode=Partitioned"), "{text}");
    assert!(
        join_filter_metric(&plan, "skipped_partitioned") >= 1,
        "the partitions skipped the CASE filter once it was filled: {text}"
    );
    assert_eq!(join_filter_metric(&plan, "rows_checked"), 0, "{text}");
    session
        .sql("SET oxidelake.scan.join_filter_partitioned = true")
        .await
        .unwrap();
    let (applied, plan) = run(&session, query).await;
    assert_eq!(join_filter_metric(&plan, "skipped_partitioned"), 0);
    assert!(join_filter_metric(&plan, "rows_checked") > 0);
    assert_eq!(applied, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_joins_lookups_are_applied_where_its_probe_side_aggregates() {
    let (_dir, session) = partitioned_cpu_session().await;
    // TPC-H Q20's shape: the filter of the join with a few suppliers' stock reaches the
    // lineitem scan through the aggregation by part and supplier.
    let query = "SELECT COUNT(*), SUM(q) FROM partsupp, \
         (SELECT l_partkey, l_suppkey, SUM(l_quantity) AS q FROM lineitem \
          GROUP BY l_partkey, l_suppkey) agg \
         WHERE ps_partkey = l_partkey AND ps_suppkey = l_suppkey AND ps_availqty < 100";
    let (rows, plan) = run(&session, query).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(text.contains("mode=Partitioned"), "{text}");
    let (filtered, scanned) = lineitem_rows(&plan);
    let filtered = filtered.unwrap_or_else(|| panic!("a JoinFilterExec over lineitem: {text}"));
    assert_eq!(
        join_filter_metric(&plan, "skipped_partitioned"),
        0,
        "{text}"
    );
    assert!(
        filtered * 10 < scanned,
        "the lookups dropped most lineitem rows before the aggregate: {filtered} of {scanned}"
    );
    session
        .sql("SET oxidelake.scan.join_filter_rows = false")
        .await
        .unwrap();
    assert_eq!(run(&session, query).await.0, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_querys_own_filters_stay_out_of_the_parquet_decoder() {
    let (_dir, session) = cpu_session().await;
    // No join, so no dynamic filter and no JoinFilterExec: the static range is
    // evaluated by the FilterExec above the scan, which hands on every row of the row
    // groups it cannot prune.
    let (_, plan) = run(
        &session,
        "SELECT COUNT(*) FROM lineitem WHERE l_quantity < 10",
    )
    .await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(
        text.contains("FilterExec") && !text.contains("JoinFilterExec"),
        "{text}"
    );
    assert_eq!(lineitem_rows(&plan), (None, LINEITEM_ROWS), "{text}");
}
