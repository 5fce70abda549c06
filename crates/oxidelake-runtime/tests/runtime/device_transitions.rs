//! `SET oxidelake.execution.device_resident = true` (ADR-0014): a GPU filter, the GPU
//! projection above it and the GPU partial aggregate above that run on device batches
//! after one `HostToDeviceExec` that EXPLAIN shows; the partial aggregate's result is what
//! comes back to the host; the answer is that of the plan without transitions. Without a
//! GPU the "device" is the CPU backend's host memory; `scripts/test-cuda-emulated.sh` runs
//! the tests again with `OXIDE_BACKEND=cuda`, where the CUDA backend filters the batches,
//! computes their products (31-digit decimals, held as 64-bit images while they fit) and
//! groups and sums them where they lie.

use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, displayable};
use oxidelake_runtime::OxideSession;

use super::data::{GeneratedData, metric_sum, on_device, run_plan as run, tpch_lake};

/// TPC-H Q6: one scan, one filter, one computed column, one aggregate.
const Q6: &str = "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem \
     WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
     AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";

/// TPC-H at SF 0.1 on a session placed for cuda (device-resident batches off).
async fn placed_for_cuda() -> (GeneratedData, OxideSession) {
    let (dir, session) = tpch_lake(0.1).await;
    session
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();
    (dir, session)
}

/// Turns `oxidelake.execution.device_resident` on or off for `session`.
async fn set_resident(session: &OxideSession, on: bool) {
    session
        .sql(&format!("SET oxidelake.execution.device_resident = {on}"))
        .await
        .unwrap();
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

/// The plan's GPU operators and transitions.
const NAMES: [&str; 5] = [
    "HostToDeviceExec",
    "GpuFilterExec",
    "GpuProjectionExec",
    "DeviceToHostExec",
    "GpuPartialAggregateExec",
];

/// Checks that `plan` uploaded its batches once, that its filter, projection and
/// partial aggregate worked on them where they lie (on a device) or bridged every batch
/// (on the CPU backend), and that nothing downloaded them besides the aggregate, which
/// took as many rows as in `host_plan` (the same query without transitions).
fn check_one_crossing(plan: &Arc<dyn ExecutionPlan>, host_plan: &Arc<dyn ExecutionPlan>) {
    let up = metric(plan, "HostToDeviceExec", "copies");
    assert!(up > 0, "batches crossed to the device");
    assert_eq!(metric(plan, "DeviceToHostExec", "copies"), 0);
    let aggregated = metric(plan, "GpuPartialAggregateExec", "rows_in");
    assert!(aggregated > 0);
    assert_eq!(
        aggregated,
        metric(host_plan, "GpuPartialAggregateExec", "rows_in"),
        "the aggregate took the rows it takes without transitions"
    );
    for node in [
        "GpuFilterExec",
        "GpuProjectionExec",
        "GpuPartialAggregateExec",
    ] {
        let bridged = metric(plan, node, "bridged_batches");
        if on_device() {
            // OXIDE_BACKEND=cuda (scripts/test-cuda-emulated.sh): in place.
            assert_eq!(
                bridged, 0,
                "{node}: the device worked on the resident batches"
            );
        } else {
            let nodes = lines_naming(plan, &[node]).len();
            assert_eq!(
                bridged,
                up * nodes,
                "{node}: the CPU backend bridges every batch in each of the {nodes}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q6s_filter_product_and_sum_run_on_device_batches_after_one_upload_with_the_same_answer()
 {
    let (_dir, session) = placed_for_cuda().await;
    let (host_rows, host_plan) = run(&session, Q6).await;
    assert_eq!(
        lines_naming(&host_plan, &NAMES),
        [
            "GpuPartialAggregateExec[cuda]",
            "GpuProjectionExec[cuda]",
            "GpuFilterExec[cuda]"
        ],
        "off by default"
    );

    set_resident(&session, true).await;
    let (rows, plan) = run(&session, Q6).await;
    assert_eq!(
        lines_naming(&plan, &NAMES),
        [
            "GpuPartialAggregateExec[cuda]",
            "GpuProjectionExec[cuda]",
            "GpuFilterExec[cuda]",
            "HostToDeviceExec[cuda]"
        ]
    );
    assert_eq!(rows, host_rows);
    check_one_crossing(&plan, &host_plan);

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
    let (host_rows, host_plan) = run(&session, &q1).await;
    set_resident(&session, true).await;
    let (rows, plan) = run(&session, &q1).await;
    assert_eq!(rows, host_rows);
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
    check_one_crossing(&plan, &host_plan);
    // Above the partial aggregate only CPU operators run: its output is on the host.
    let text = displayable(plan.as_ref()).indent(false).to_string();
    let above: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("GpuPartialAggregateExec"))
        .collect();
    assert!(above.iter().all(|l| !l.contains("[cuda]")), "{text}");
    assert!(text.contains("input=device"), "{text}");
}

/// The names of the children of every node called `name` in `plan`.
fn children_of(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![Arc::clone(plan)];
    while let Some(n) = stack.pop() {
        if n.name() == name {
            out.extend(n.children().iter().map(|c| c.name().to_string()));
        }
        stack.extend(n.children().into_iter().cloned());
    }
    out
}

/// TPC-H Q3 and Q5 (ADR-0014, stage 3): each scan crosses to the device once, uploaded
/// for the GPU filter that reads it or for the GPU join it feeds; every join builds and
/// probes there (`build=device`, `probe=device`: build sides appended and indexed where
/// they lie, Q5's two-column key combined there, joined rows gathered from both sides),
/// and so do the revenue product and the partial aggregate, whose groups are the one way
/// back: the plans have no `DeviceToHostExec`. On the emulated driver nothing is
/// bridged, what comes back (the groups, the build sides' key columns, 4- and 8-byte
/// counts) is under a tenth of what went up and less than the plan without
/// transitions brings back. Answers equal that plan's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q3_and_q5_cross_to_the_device_once_per_scan_and_back_once_as_their_aggregates_groups()
{
    let (_dir, session) = placed_for_cuda().await;
    // (query, scans, joins)
    for (query, scans, joins) in [(3, 3, 2), (5, 6, 5)] {
        let sql = tpch(query);
        set_resident(&session, false).await;
        let (host_rows, host_plan) = run(&session, &sql).await;
        set_resident(&session, true).await;
        let (rows, plan) = run(&session, &sql).await;
        assert_eq!(rows, host_rows, "Q{query}");
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
        assert!(
            lines_naming(&plan, &["DeviceToHostExec"]).is_empty(),
            "Q{query}: no download; the partial aggregate's groups are the way back\n{text}"
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
        assert!(text.contains("input=device"), "Q{query}\n{text}");
        assert_eq!(
            metric(&plan, "GpuPartialAggregateExec", "rows_in"),
            metric(&host_plan, "GpuPartialAggregateExec", "rows_in"),
            "Q{query}: the aggregate took the rows it takes without transitions"
        );
        for node in [
            "GpuFilterExec",
            "GpuHashJoinExec",
            "GpuProjectionExec",
            "GpuPartialAggregateExec",
        ] {
            let bridged = metric(&plan, node, "bridged_batches");
            if on_device() {
                assert_eq!(
                    bridged, 0,
                    "Q{query} {node}: the device worked on every batch"
                );
            } else {
                assert!(bridged > 0, "Q{query} {node}: the CPU backend bridges");
            }
        }
        if on_device() {
            set_resident(&session, false).await;
            let host = bytes_crossing(&session, &sql).await;
            set_resident(&session, true).await;
            let (up, back) = bytes_crossing(&session, &sql).await;
            // What comes back is a small part of what went up, and less than the host
            // interface brings back. (With the joins' filters reaching the scans under
            // the GPU filters, far fewer rows go up at all than before; the part that
            // comes back was a twentieth then and is about a fifteenth now.)
            assert!(
                back * 10 < up && back < host.1,
                "Q{query}: {up} bytes up and {back} back; the host interface {host:?}"
            );
        }
    }
}

/// The bytes the process copied host to device and back while `query` ran on `session`
/// (the telemetry hub's totals, which every CUDA copy adds to; the CPU backend copies
/// nothing it counts). Process-wide: the emulated script runs this module one test at a
/// time.
async fn bytes_crossing(session: &OxideSession, query: &str) -> (u64, u64) {
    let hub = oxidelake_core::TelemetryHub::global();
    let before = hub.snapshot().transfers;
    let _ = run(session, query).await;
    let after = hub.snapshot().transfers;
    (
        after.h2d_bytes - before.h2d_bytes,
        after.d2h_bytes - before.d2h_bytes,
    )
}

/// What crosses the bus, with and without device-resident batches, for Q1, Q3, Q5 and
/// Q6 (docs/benchmarks.md has the table of a run). On a device (the emulated script),
/// every query must bring fewer bytes back to the host with the switch on, and Q1 and
/// Q6, whose device operators form one chain from the scan to the partial aggregate,
/// must move fewer bytes in all. Q3 and Q5 are reported: their uploads grow (whole scan
/// batches as 8-byte images, and joined rows going up again), see docs/benchmarks.md.
/// On the CPU backend nothing is counted and the test only prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_resident_batches_bring_fewer_bytes_back_and_move_fewer_for_q1_and_q6() {
    let (_dir, session) = placed_for_cuda().await;
    println!(
        "bytes across the bus, TPC-H SF 0.1, placed for cuda: query, host interface H2D / D2H, device-resident H2D / D2H"
    );
    for query in [1, 3, 5, 6] {
        let sql = tpch(query);
        set_resident(&session, false).await;
        let host = bytes_crossing(&session, &sql).await;
        set_resident(&session, true).await;
        let resident = bytes_crossing(&session, &sql).await;
        println!(
            "bytes across the bus: Q{query} {} / {} -> {} / {}",
            host.0, host.1, resident.0, resident.1
        );
        if on_device() {
            let what = format!("Q{query}: {host:?} host interface, {resident:?} resident");
            assert!(host.0 > 0 && host.1 > 0, "{what}");
            assert!(resident.1 < host.1, "fewer bytes back: {what}");
            if matches!(query, 1 | 6) {
                let (all_host, all_resident) = (host.0 + host.1, resident.0 + resident.1);
                assert!(all_resident < all_host, "fewer in all: {what}");
            }
        }
    }
}
