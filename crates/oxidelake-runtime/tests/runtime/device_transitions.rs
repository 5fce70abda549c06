//! `SET oxidelake.execution.device_resident = true` (ADR-0014): a GPU filter and the GPU
//! projection above it run between one `HostToDeviceExec` and one `DeviceToHostExec` that
//! EXPLAIN shows, with the answer of the plan without them. Without a GPU the "device" is
//! the CPU backend's host memory; `scripts/test-cuda-emulated.sh` runs the test again with
//! `OXIDE_BACKEND=cuda`, where the CUDA backend filters the batches and computes their
//! product (a 31-digit decimal, held as 64-bit images while it fits) where they lie.

use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use oxidelake_runtime::OxideSession;

use super::data::{sorted_rows, tpch_lake};

/// TPC-H Q6: one scan, one filter, one computed column, one aggregate.
const Q6: &str = "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem \
     WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
     AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";

/// The sum of metric `name` over the plan's nodes called `node`.
fn metric(plan: &Arc<dyn ExecutionPlan>, node: &str, name: &str) -> usize {
    let mut sum = 0;
    let mut stack = vec![Arc::clone(plan)];
    while let Some(n) = stack.pop() {
        if n.name() == node {
            sum += n
                .metrics()
                .and_then(|m| m.sum_by_name(name))
                .map_or(0, |v| v.as_usize());
        }
        stack.extend(n.children().into_iter().cloned());
    }
    sum
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

async fn run(session: &OxideSession, query: &str) -> (Vec<String>, Arc<dyn ExecutionPlan>) {
    let plan = session.physical_plan(query).await.unwrap();
    let batches = collect(Arc::clone(&plan), session.context().task_ctx())
        .await
        .unwrap();
    (sorted_rows(&batches), plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_q6s_filter_and_product_run_between_one_upload_and_one_download_with_the_same_answer()
{
    let (_dir, session) = tpch_lake(0.1).await;
    session
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();
    let (host_rows, host_plan) = run(&session, Q6).await;
    let names = [
        "HostToDeviceExec",
        "GpuFilterExec",
        "GpuProjectionExec",
        "DeviceToHostExec",
    ];
    assert_eq!(
        lines_naming(&host_plan, &names),
        ["GpuProjectionExec[cuda]", "GpuFilterExec[cuda]"],
        "off by default"
    );

    session
        .sql("SET oxidelake.execution.device_resident = true")
        .await
        .unwrap();
    let (rows, plan) = run(&session, Q6).await;
    assert_eq!(
        lines_naming(&plan, &names),
        [
            "DeviceToHostExec[cuda]",
            "GpuProjectionExec[cuda]",
            "GpuFilterExec[cuda]",
            "HostToDeviceExec[cuda]"
        ]
    );
    assert_eq!(rows, host_rows);
    let (up, down) = (
        metric(&plan, "HostToDeviceExec", "copies"),
        metric(&plan, "DeviceToHostExec", "copies"),
    );
    assert!(up > 0, "batches crossed to the device");
    assert_eq!(up, down, "each batch crossed once each way");
    let on_device = oxidelake_device::HardwareDetector::shared()
        .is_ok_and(|b| b.kind() != oxidelake_core::BackendKind::CpuSimd);
    for node in ["GpuFilterExec", "GpuProjectionExec"] {
        let bridged = metric(&plan, node, "bridged_batches");
        if on_device {
            // OXIDE_BACKEND=cuda (scripts/test-cuda-emulated.sh): in place.
            assert_eq!(
                bridged, 0,
                "{node}: the device worked on the resident batches"
            );
        } else {
            assert_eq!(bridged, up, "{node}: the CPU backend bridges every batch");
        }
    }

    // The user's EXPLAIN shows them too.
    let explain = session.sql(&format!("EXPLAIN {Q6}")).await.unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&explain)
        .unwrap()
        .to_string();
    assert!(
        text.contains("HostToDeviceExec[cuda]") && text.contains("DeviceToHostExec[cuda]"),
        "{text}"
    );
}
