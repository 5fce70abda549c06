//! Fault injection through the emulated CUDA driver (tools/cuda-emu): an allocation, a
//! launch, a copy or a module load fails, or the device runs out of memory, in the middle
//! of an operator's batch. The query must still return exactly the CPU answer, with the
//! fallback counted (`cpu_fallback_batches`, `device_errors`), or fail with a typed
//! error — never panic.
//!
//! These run only on the emulator (`scripts/test-cuda-emulated.sh`); on a real driver the
//! hook `oxide_emu_set_fault` does not exist and each test says so and returns.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, DistanceMetric, Literal, Predicate};
use oxidelake_compute::{
    AggInput, BackendChoice, GpuFilterExec, GpuHashJoinExec, GpuPartialAggregateExec,
    GpuVectorDistanceExec, PartialAggSpec, PartialFunc,
};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::{CudaBackend, DeviceMemory};

use super::data::{self, Rng};
use super::emu::fault_arm;
use super::plans::cpu;
use super::rows::assert_same_rows;

/// One fault plan at a time: the plan and the driver's sticky error are process-wide.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `body` with the fault plan `spec` armed, then clears the plan (and any sticky
/// error). `None` when the driver is not the emulator.
async fn with_fault<T>(spec: &str, body: impl AsyncFnOnce() -> T) -> Option<T> {
    let Some(arm) = fault_arm() else {
        eprintln!("skipping: libcuda is not the emulated driver (no oxide_emu_set_fault)");
        return None;
    };
    let _serial = SERIAL.lock().await;
    arm(spec);
    let out = body().await;
    arm("");
    Some(out)
}

/// A fresh CUDA backend: its module cache is empty, so the first use of each kernel
/// loads a module (where `module:` faults strike).
fn cuda() -> BackendChoice {
    BackendChoice::Fixed(Arc::new(CudaBackend::try_new(0).unwrap()))
}

fn source(parts: &[Vec<RecordBatch>], schema: &SchemaRef) -> Arc<dyn ExecutionPlan> {
    MemorySourceConfig::try_new_exec(parts, Arc::clone(schema), None).unwrap()
}

fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    plan.metrics()
        .and_then(|m| m.sum_by_name(name))
        .map(|v| v.as_usize())
        .unwrap_or(0)
}

async fn run(plan: &Arc<dyn ExecutionPlan>) -> Vec<RecordBatch> {
    collect(Arc::clone(plan), SessionContext::new().task_ctx())
        .await
        .unwrap()
}

/// Builds the operator for `backend` over seeded data.
type Build = fn(BackendChoice, &[Vec<RecordBatch>], &[Vec<RecordBatch>]) -> Arc<dyn ExecutionPlan>;

fn filter(
    backend: BackendChoice,
    parts: &[Vec<RecordBatch>],
    _: &[Vec<RecordBatch>],
) -> Arc<dyn ExecutionPlan> {
    let predicates = vec![Predicate::from(ColumnPredicate {
        column: 1,
        op: CmpOp::Gt,
        literal: Literal::Int64(5),
    })];
    Arc::new(
        GpuFilterExec::try_new(
            source(parts, &data::schema()),
            predicates,
            vec![0, 1, 2],
            BackendKind::Cuda,
        )
        .unwrap()
        .with_backend(backend),
    )
}

fn aggregate(
    backend: BackendChoice,
    parts: &[Vec<RecordBatch>],
    _: &[Vec<RecordBatch>],
) -> Arc<dyn ExecutionPlan> {
    // The partial states by k: SUM(a), COUNT(b), MAX(c), AVG(b) (count and sum).
    let specs = vec![
        PartialAggSpec {
            func: PartialFunc::Sum,
            input: Some(AggInput {
                column: 1,
                cast: None,
            }),
        },
        PartialAggSpec {
            func: PartialFunc::Count,
            input: Some(AggInput {
                column: 2,
                cast: None,
            }),
        },
        PartialAggSpec {
            func: PartialFunc::Max,
            input: Some(AggInput {
                column: 3,
                cast: None,
            }),
        },
        PartialAggSpec {
            func: PartialFunc::Avg,
            input: Some(AggInput {
                column: 2,
                cast: None,
            }),
        },
    ];
    let states = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("sum(a)[sum]", DataType::Int64, true),
        Field::new("count(b)[count]", DataType::Int64, true),
        Field::new("max(c)[max]", DataType::Float64, true),
        Field::new("avg(b)[count]", DataType::UInt64, true),
        Field::new("avg(b)[sum]", DataType::Float64, true),
    ]));
    Arc::new(
        GpuPartialAggregateExec::try_new(
            source(parts, &data::schema()),
            vec![0],
            specs,
            states,
            BackendKind::Cuda,
        )
        .unwrap()
        .with_backend(backend),
    )
}

fn vector(
    backend: BackendChoice,
    parts: &[Vec<RecordBatch>],
    _: &[Vec<RecordBatch>],
) -> Arc<dyn ExecutionPlan> {
    Arc::new(
        GpuVectorDistanceExec::try_new(
            source(parts, &data::schema()),
            4,
            vec![1.0, -2.5, 0.5, 3.0],
            DistanceMetric::L2,
            "d",
            BackendKind::Cuda,
        )
        .unwrap()
        .with_backend(backend),
    )
}

fn join(
    backend: BackendChoice,
    left: &[Vec<RecordBatch>],
    right: &[Vec<RecordBatch>],
) -> Arc<dyn ExecutionPlan> {
    let schema = data::schema();
    Arc::new(
        GpuHashJoinExec::try_new(
            source(left, &schema),
            source(right, &schema),
            0,
            0,
            BackendKind::Cuda,
        )
        .unwrap()
        .with_backend(backend),
    )
}

/// Arms `spec`, runs the operator on a fresh CUDA backend, and checks that it returns
/// the CPU answer with the fallback counted.
async fn falls_back_to_the_cpu(spec: &str, build: Build, what: &str) {
    let mut rng = Rng::new(7);
    let (left, right) = (
        data::partitions(&mut rng, 16),
        data::partitions(&mut rng, 16),
    );
    let want = run(&build(cpu(), &left, &right)).await;
    let checked = with_fault(spec, async || {
        let plan = build(cuda(), &left, &right);
        let got = run(&plan).await;
        assert_same_rows(&format!("{what} with fault {spec}"), &got, &want, 1e-9);
        (
            metric(&plan, "cpu_fallback_batches"),
            metric(&plan, "device_errors"),
        )
    })
    .await;
    if let Some((fallbacks, errors)) = checked {
        assert!(fallbacks > 0, "{what}: no batch fell back under {spec}");
        assert!(errors > 0, "{what}: no device error counted under {spec}");
    }
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_failed_allocation_in_a_filter_batch_completes_on_the_cpu_and_is_counted() {
    falls_back_to_the_cpu("alloc:1", filter, "filter").await;
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_failed_launch_in_an_aggregate_completes_on_the_cpu_and_is_counted() {
    falls_back_to_the_cpu("launch:1", aggregate, "aggregate").await;
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_failed_copy_in_a_vector_distance_batch_completes_on_the_cpu_and_is_counted() {
    falls_back_to_the_cpu("copy:1", vector, "vector distance").await;
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_kernel_module_that_does_not_load_leaves_the_join_on_the_cpu_and_is_counted() {
    falls_back_to_the_cpu("module:1", join, "join").await;
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_kernel_that_faults_during_the_probe_finishes_the_join_on_a_cpu_table() {
    // Launch 1 builds the table on the device; the fault strikes a probe kernel and is
    // sticky, as an illegal address is on a real GPU: the device's table is lost.
    falls_back_to_the_cpu("kernel:2+", join, "join probe").await;
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn device_out_of_memory_is_a_typed_error_and_the_filter_completes_on_the_cpu() {
    let backend = CudaBackend::try_new(0).unwrap();
    let result = with_fault("oom", async || backend.alloc_device(1 << 20).map(|_| ())).await;
    if let Some(result) = result {
        assert!(
            matches!(result, Err(EngineError::OutOfMemory { .. })),
            "{result:?}"
        );
    }
    falls_back_to_the_cpu("oom", filter, "filter").await;
}
