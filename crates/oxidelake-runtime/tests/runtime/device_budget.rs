//! `oxidelake.memory.device_limit` over every GPU operator's device state, not only the
//! spilling joins' build sides: a filter, computed projection, partial aggregate or join
//! table whose device state the budget refuses runs on the CPU, and the answer is the
//! unlimited one. The CPU backend claims nothing (its state is host memory, accounted by
//! the host pool); `scripts/test-cuda-emulated.sh` runs the test again with
//! `OXIDE_BACKEND=cuda`, where every operator claims from the process's budget, the
//! operators between the device transitions included (ADR-0014: placed for cuda, the
//! GPU operators always keep their batches on the device).

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;

use super::data::{metric_sum, on_device, run_plan as run, tpch_lake};

/// The sum of metric `name` over the plan's OxideLake operators (`Gpu*Exec`).
fn gpu_metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    metric_sum(plan, |n| n.name().starts_with("Gpu"), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_operators_whose_device_state_passes_the_session_limit_run_on_the_cpu_with_the_same_answer()
 {
    let (_dir, session) = tpch_lake(0.1).await;
    session
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();
    let device = on_device();
    // Q1: filter, computed projection, partial aggregate. Q3: those and two joins.
    for n in [1, 3] {
        let query = oxidelake_runtime::cli::tpch::tpch_query(n, 0.1)
            .unwrap()
            .remove(0);
        session
            .sql("SET oxidelake.memory.device_limit = none")
            .await
            .unwrap();
        let (unlimited, plan) = run(&session, &query).await;
        let label = format!("Q{n}");
        assert_eq!(gpu_metric(&plan, "device_budget_cpu_batches"), 0, "{label}");
        assert_eq!(gpu_metric(&plan, "device_budget_host_builds"), 0, "{label}");
        // An executed join keeps its build side, and the side its claim, as long as
        // the plan lives.
        drop(plan);
        // 64 KiB: less than any batch's state.
        session
            .sql("SET oxidelake.memory.device_limit = '64K'")
            .await
            .unwrap();
        let (limited, plan) = run(&session, &query).await;
        assert_eq!(limited, unlimited, "{label}: the answer under the limit");
        let refused = gpu_metric(&plan, "device_budget_cpu_batches");
        let host_builds = gpu_metric(&plan, "device_budget_host_builds");
        println!(
            "device budget: {label}: {refused} batches refused, {host_builds} build sides on the host"
        );
        if device {
            assert!(refused > 0, "{label}: no batch refused under 64 KiB");
            assert!(
                gpu_metric(&plan, "cpu_fallback_batches") >= refused,
                "{label}: a refused batch is a CPU batch"
            );
            if n == 3 {
                // Its joins build from device batches, each past 64 KiB.
                assert!(host_builds > 0, "{label}: no build side kept on the host");
            }
        } else {
            assert_eq!(refused, 0, "{label}: the CPU backend claims nothing");
        }
        drop(plan);
        assert_eq!(
            oxidelake_compute::DeviceBudget::global().claimed(),
            0,
            "{label}: every claim was returned"
        );
    }
}
