//! Placed for cuda, the GPU operators keep their batches on the device between the
//! transitions the planner puts around them (ADR-0014; the only device path since issue
//! #45, no option turns it on): a GPU filter, the GPU projection above it and the GPU
//! partial aggregate above that run on device batches after one `HostToDeviceExec` that
//! EXPLAIN shows; the partial aggregate's result is what comes back to the host; the
//! answer is that of the plan placed for the CPU. Without a GPU the batches stay host
//! batches: the upload copies nothing (`copies` 0) and each operator runs its CPU path
//! on them. `scripts/test-cuda-emulated.sh` runs
//! the tests again with `OXIDE_BACKEND=cuda`, where the CUDA backend filters the batches,
//! computes their products (31-digit decimals, held as 64-bit images while they fit) and
//! groups and sums them where they lie: every row a scan hands on crosses to the device
//! once, and the partial aggregates' groups are what comes back.

use std::sync::Arc;

use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use oxidelake_runtime::OxideSession;

use super::data::{GeneratedData, metric_sum, on_device, run_plan as run, tpch_lake};

/// TPC-H Q6: one scan, one filter, one computed column, one aggregate.
const Q6: &str = "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem \
     WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
     AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";

/// TPC-H at SF 0.1 on a session placed for cuda.
async fn placed_for_cuda() -> (GeneratedData, OxideSession) {
    let (dir, session) = tpch_lake(0.1).await;
    session
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();
    (dir, session)
}

/// The rows of `query` on `session` placed for the CPU (DataFusion's operators, no
/// transitions); the session is placed for cuda again afterwards.
async fn rows_placed_for_cpu(session: &OxideSession, query: &str) -> Vec<String> {
    session
        .sql("SET oxidelake.placement.target = 'cpu'")
        .await
        .unwrap();
    let (rows, plan) = run(session, query).await;
    assert!(
        lines_naming(&plan, &["HostToDeviceExec", "DeviceToHostExec"]).is_empty(),
        "no transitions placed for the CPU"
    );
    session
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();
    rows
}

/// TPC-H query `n` at SF 0.1 (its only statement).
fn tpch(n: i32) -> String {
    oxidelake_runtime::cli::tpch::tpch_query(n, 0.1)
        .unwrap()
        .remove(0)
}

/// The sum of metric `name` over the plan's nodes called `node`.
fn metric(plan: &Arc<dyn ExecutionPlan>, node: &str, name: &str) -> usize {
    metric_sum(plan, |n| n.name() == node, name)
}

/// Counter `name` of `node` alone, over its partitions.
fn own_metric(node: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    node.metrics()
        .and_then(|m| m.sum_by_name(name))
        .map_or(0, |v| v.as_usize())
}

/// The rows `node` handed on (DataFusion's `output_rows`, which `sum_by_name` skips).
fn output_rows(node: &Arc<dyn ExecutionPlan>) -> usize {
    node.metrics()
        .and_then(|m| m.output_rows())
        .unwrap_or_else(|| panic!("{} reports no output_rows", node.name()))
}

/// The batches `node` handed on (DataFusion's `output_batches`).
fn output_batches(node: &Arc<dyn ExecutionPlan>) -> usize {
    node.metrics()
        .and_then(|m| m.sum(|metric| matches!(metric.value(), MetricValue::OutputBatches(_))))
        .map_or(0, |v| v.as_usize())
}

/// The plan's node names from the root down, for the lines naming one of `names`.
fn lines_naming(plan: &Arc<dyn ExecutionPlan>, names: &[&str]) -> Vec<String> {
    displayable(plan.as_ref())
        .indent(false)
        .to_string()
        .lines()
        .map(str::trim_start)
        .filter(|l| names.iter().any(|n| l.starts_with(n)))
        .map(|l| l.split(':').next().unwrap_or_default().to_string())
        .collect()
}

/// Every node of `plan` called `name`.
fn nodes(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Vec<Arc<dyn ExecutionPlan>> {
    let mut out = Vec::new();
    let mut stack = vec![Arc::clone(plan)];
    while let Some(n) = stack.pop() {
        if n.name() == name {
            out.push(Arc::clone(&n));
        }
        stack.extend(n.children().into_iter().cloned());
    }
    out
}

/// The names of the children of every node called `name` in `plan`.
fn children_of(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Vec<String> {
    nodes(plan, name)
        .iter()
        .flat_map(|n| n.children().into_iter().map(|c| c.name().to_string()))
        .collect()
}

/// The plan's GPU operators and transitions.
const NAMES: [&str; 5] = [
    "HostToDeviceExec",
    "GpuFilterExec",
    "GpuProjectionExec",
    "DeviceToHostExec",
    "GpuPartialAggregateExec",
];

/// The GPU operators that work on device batches between the transitions.
const GPU_OPERATORS: [&str; 4] = [
    "GpuFilterExec",
    "GpuHashJoinExec",
    "GpuProjectionExec",
    "GpuPartialAggregateExec",
];

/// Checks what crossed the bus while `plan` (placed for cuda, run) ran, and returns the
/// batches its uploads copied to the device:
/// - in: on a device, each `HostToDeviceExec` copied every row its input handed on, once
///   (its `rows_in` equals the input's `output_rows`), and a GPU filter or projection
///   reading an upload took each copied batch once (its `output_batches` equals the
///   upload's `copies`); on the CPU backend nothing was copied (`copies` 0);
/// - between: on a device no GPU operator refused a batch in place (each worked on the
///   batches where they lie: `refused_batches` 0; on the CPU backend each ran its CPU
///   path on host batches), and the device failed none (`device_errors` 0);
/// - out: the plan has no `DeviceToHostExec`: its partial aggregates read the device
///   batches (`input=device`), each taking every row the operator below it handed on,
///   and their groups are the one way back to the host.
fn check_crossings(plan: &Arc<dyn ExecutionPlan>, what: &str) -> usize {
    let text = displayable(plan.as_ref()).indent(false).to_string();
    let uploads = nodes(plan, "HostToDeviceExec");
    assert!(!uploads.is_empty(), "{what}: no upload\n{text}");
    let copies = metric(plan, "HostToDeviceExec", "copies");
    if on_device() {
        // OXIDE_BACKEND=cuda (scripts/test-cuda-emulated.sh).
        assert!(copies > 0, "{what}: batches crossed to the device\n{text}");
        for upload in &uploads {
            let input = Arc::clone(upload.children()[0]);
            assert_eq!(
                own_metric(upload, "rows_in"),
                output_rows(&input),
                "{what}: every row of the upload's input ({}) crossed once\n{text}",
                input.name()
            );
        }
        for name in ["GpuFilterExec", "GpuProjectionExec"] {
            for node in nodes(plan, name) {
                let input = Arc::clone(node.children()[0]);
                if input.name() == "HostToDeviceExec" {
                    assert_eq!(
                        output_batches(&node),
                        own_metric(&input, "copies"),
                        "{what} {name}: each copied batch taken once\n{text}"
                    );
                }
            }
        }
    } else {
        assert_eq!(
            copies, 0,
            "{what}: the CPU backend keeps the batches on the host"
        );
    }
    assert!(
        nodes(plan, "DeviceToHostExec").is_empty(),
        "{what}: no download; the partial aggregates' groups are the way back\n{text}"
    );
    assert!(text.contains("input=device"), "{what}\n{text}");
    for node in GPU_OPERATORS {
        assert_eq!(
            metric(plan, node, "refused_batches"),
            0,
            "{what} {node}: no batch refused in place"
        );
        assert_eq!(
            metric(plan, node, "device_errors"),
            0,
            "{what} {node}: the device failed no batch"
        );
    }
    let aggregates = nodes(plan, "GpuPartialAggregateExec");
    assert!(!aggregates.is_empty(), "{what}\n{text}");
    for aggregate in &aggregates {
        let took = own_metric(aggregate, "rows_in");
        assert!(took > 0, "{what}: the aggregate took rows");
        assert_eq!(
            took,
            output_rows(aggregate.children()[0]),
            "{what}: the aggregate took every row handed on to it"
        );
    }
    copies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q6s_filter_product_and_sum_run_on_device_batches_after_one_upload_with_the_same_answer()
 {
    let (_dir, session) = placed_for_cuda().await;
    let want = rows_placed_for_cpu(&session, Q6).await;
    let (rows, plan) = run(&session, Q6).await;
    assert_eq!(
        lines_naming(&plan, &NAMES),
        [
            "GpuPartialAggregateExec[cuda]",
            "GpuProjectionExec[cuda]",
            "GpuFilterExec[cuda]",
            "HostToDeviceExec[cuda]"
        ],
        "transitions without any option"
    );
    assert_eq!(rows, want, "the answer placed for cpu");
    check_crossings(&plan, "Q6");

    // The user's EXPLAIN shows them too.
    let explain = session.sql(&format!("EXPLAIN {Q6}")).await.unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&explain)
        .unwrap()
        .to_string();
    assert!(
        text.contains("HostToDeviceExec[cuda]")
            && text.contains("GpuPartialAggregateExec[cuda]: mode=Partial, input=device"),
        "{text}"
    );
}

/// TPC-H Q1: grouped by two string columns, eight aggregates over decimals and
/// computed decimal products. Its one scan crosses to the device once; the partial
/// aggregate groups the strings on the device, and its groups are what comes back
/// before the first CPU operator (the final aggregate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q1_crosses_to_the_device_once_and_back_as_its_partial_aggregates_groups() {
    let (_dir, session) = placed_for_cuda().await;
    let q1 = tpch(1);
    let want = rows_placed_for_cpu(&session, &q1).await;
    let (rows, plan) = run(&session, &q1).await;
    assert_eq!(rows, want, "the answer placed for cpu");
    assert_eq!(rows.len(), 4, "Q1 has four groups");
    let lines = lines_naming(&plan, &NAMES);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("HostToDeviceExec"))
            .count(),
        1,
        "one upload for the one scan: {lines:?}"
    );
    assert_eq!(
        lines.first().map(String::as_str),
        Some("GpuPartialAggregateExec[cuda]")
    );
    check_crossings(&plan, "Q1");
    // Above the partial aggregate only CPU operators run: its output is on the host.
    let text = displayable(plan.as_ref()).indent(false).to_string();
    let above: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("GpuPartialAggregateExec"))
        .collect();
    assert!(above.iter().all(|l| !l.contains("[cuda]")), "{text}");
    assert!(text.contains("input=device"), "{text}");
}

/// TPC-H Q3 and Q5 (ADR-0014, stage 3): each scan crosses to the device once, uploaded
/// for the GPU filter that reads it or for the GPU join it feeds; every join builds and
/// probes there (`build=device`, `probe=device`: build sides appended and indexed where
/// they lie, Q5's two-column key combined there, joined rows gathered from both sides),
/// and so do the revenue product and the partial aggregate, whose groups are the one way
/// back: the plans have no `DeviceToHostExec`. On the emulated driver no batch is
/// refused in place; on the CPU backend nothing is copied. Answers equal the plan
/// placed for the CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q3_and_q5_cross_to_the_device_once_per_scan_and_back_once_as_their_aggregates_groups()
{
    let (_dir, session) = placed_for_cuda().await;
    // (query, scans, joins)
    for (query, scans, joins) in [(3, 3, 2), (5, 6, 5)] {
        let sql = tpch(query);
        let want = rows_placed_for_cpu(&session, &sql).await;
        let (rows, plan) = run(&session, &sql).await;
        assert_eq!(rows, want, "Q{query}: the answer placed for cpu");
        let text = displayable(plan.as_ref()).indent(false).to_string();
        let uploads = children_of(&plan, "HostToDeviceExec");
        assert_eq!(
            uploads.len(),
            scans,
            "Q{query}: one upload per scan\n{text}"
        );
        // A single-file scan reaches its upload through a round-robin repartition, a
        // scan a join filters through the join's filter.
        assert!(
            uploads
                .iter()
                .all(|c| ["DataSourceExec", "RepartitionExec", "JoinFilterExec"]
                    .contains(&c.as_str())),
            "Q{query}: each upload reads a scan\n{text}"
        );
        assert_eq!(
            text.matches("GpuHashJoinExec").count(),
            joins,
            "Q{query}\n{text}"
        );
        assert_eq!(
            text.matches("build=device").count(),
            joins,
            "Q{query}\n{text}"
        );
        assert_eq!(
            text.matches("probe=device").count(),
            joins,
            "Q{query}\n{text}"
        );
        check_crossings(&plan, &format!("Q{query}"));
    }
}

/// The bytes the process copied host to device and back while `query` ran on `session`
/// (the telemetry hub's totals, which every CUDA copy adds to; the CPU backend copies
/// nothing it counts), with the rows and the plan that ran. Process-wide: the emulated
/// script runs this module one test at a time.
async fn run_counting_bytes(
    session: &OxideSession,
    query: &str,
) -> (Vec<String>, Arc<dyn ExecutionPlan>, (u64, u64)) {
    let hub = oxidelake_core::TelemetryHub::global();
    let before = hub.snapshot().transfers;
    let (rows, plan) = run(session, query).await;
    let after = hub.snapshot().transfers;
    let bytes = (
        after.h2d_bytes - before.h2d_bytes,
        after.d2h_bytes - before.d2h_bytes,
    );
    (rows, plan, bytes)
}

/// What crosses the bus for Q1, Q3, Q5 and Q6 placed for cuda (the count of
/// copies; docs/benchmarks.md has the bytes of a run): once per scan in (each upload
/// copies every row its scan hands on, once) and once per result out (no download: the
/// partial aggregates' groups come back), with the answer placed for the CPU. On a
/// device (the emulated script) what comes back is under a quarter of what went up, and
/// the scans of Q1 and Q6 cross narrow: Q1 reads five numbers (40 bytes a row as 8-byte
/// images) and two one-letter strings (10 bytes), Q6 four numbers (32 bytes), and their
/// offsets bring them under 24 and 12 bytes a lineitem row. On the CPU backend nothing
/// is copied (`copies` 0) and the bytes are only printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q1_q3_q5_and_q6_cross_the_bus_once_per_scan_in_and_once_per_result_out() {
    let (_dir, session) = placed_for_cuda().await;
    println!(
        "bytes across the bus, TPC-H SF 0.1, placed for cuda: query, H2D / D2H bytes, batches copied to the device, uploads"
    );
    let count = rows_placed_for_cpu(&session, "SELECT count(*) FROM lineitem").await;
    let lineitem: u64 = count[0].parse().unwrap();
    for query in [1, 3, 5, 6] {
        let sql = tpch(query);
        let what = format!("Q{query}");
        let want = rows_placed_for_cpu(&session, &sql).await;
        let (rows, plan, (up, back)) = run_counting_bytes(&session, &sql).await;
        assert_eq!(rows, want, "{what}: the answer placed for cpu");
        let copies = check_crossings(&plan, &what);
        let uploads = nodes(&plan, "HostToDeviceExec").len();
        println!(
            "bytes across the bus: Q{query} {up} / {back}, {copies} batches up through {uploads} uploads"
        );
        if on_device() {
            assert!(
                up > 0 && back * 4 < up,
                "{what}: {up} bytes up and {back} back"
            );
            // Q3 and Q5 scan several tables, so a bound per lineitem row would not say
            // much: only Q1's and Q6's are checked (no bound for the others).
            let narrow = match query {
                1 => 24,
                6 => 12,
                _ => u64::MAX / lineitem,
            };
            assert!(
                up < narrow * lineitem,
                "{what}: {up} bytes up for {lineitem} lineitem rows"
            );
        }
    }
}
