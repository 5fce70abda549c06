//! Device transitions (ADR-0014) on the CPU backend, whose "device" is host memory: a
//! GPU filter between `HostToDeviceExec` and `DeviceToHostExec` gives the rows of the
//! same filter on host batches, each batch crossing once each way.

use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal, Predicate};
use oxidelake_compute::{
    BackendChoice, DeviceToHostExec, GpuFilterExec, HostToDeviceExec, as_resident,
};
use oxidelake_core::BackendKind;
use oxidelake_device::CpuBackend;

use super::rows::assert_same_rows;

const BATCHES: usize = 12;
const ROWS: usize = 500;

/// `BATCHES` batches of `a` (every 5th NULL) and `s` = "k<a % 7>".
fn scan() -> Arc<dyn ExecutionPlan> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let parts: Vec<RecordBatch> = (0..BATCHES)
        .map(|b| {
            let start = (b * ROWS) as i64;
            let a: Int64Array = (start..start + ROWS as i64)
                .map(|v| (v % 5 != 0).then_some(v))
                .collect();
            let s: StringArray = (start..start + ROWS as i64)
                .map(|v| Some(format!("k{}", v % 7)))
                .collect();
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(a), Arc::new(s)]).unwrap()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap()
}

/// `a > 1234 AND s <> 'k3'`, projecting `s` then `a`.
fn filter(input: Arc<dyn ExecutionPlan>) -> GpuFilterExec {
    let predicates = vec![
        Predicate::from(ColumnPredicate {
            column: 0,
            op: CmpOp::Gt,
            literal: Literal::Int64(1234),
        }),
        Predicate::from(ColumnPredicate {
            column: 1,
            op: CmpOp::NotEq,
            literal: Literal::Utf8("k3".into()),
        }),
    ];
    GpuFilterExec::try_new(input, predicates, vec![1, 0], BackendKind::Cuda)
        .unwrap()
        .with_backend(BackendChoice::Fixed(Arc::new(CpuBackend::new())))
}

fn metric(plan: &dyn ExecutionPlan, name: &str) -> usize {
    plan.metrics()
        .and_then(|m| m.sum_by_name(name))
        .map(|v| v.as_usize())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_filter_between_transitions_gives_the_host_filters_rows_crossing_once_each_way_per_batch()
{
    let cpu = BackendChoice::Fixed(Arc::new(CpuBackend::new()));
    let h2d: Arc<dyn ExecutionPlan> =
        Arc::new(HostToDeviceExec::new(scan(), BackendKind::Cuda).with_backend(cpu));
    let resident: Arc<dyn ExecutionPlan> = Arc::new(filter(Arc::clone(&h2d)));
    assert!(
        as_resident(&resident).is_some(),
        "the filter hands on device batches"
    );
    let d2h = Arc::new(DeviceToHostExec::new(
        Arc::clone(&resident),
        BackendKind::Cuda,
    ));
    let ctx = SessionContext::new().task_ctx();
    let ours = collect(d2h.clone(), Arc::clone(&ctx)).await.unwrap();
    let stock = collect(Arc::new(filter(scan())), ctx).await.unwrap();
    let rows = assert_same_rows("filter between transitions", &ours, &stock, 0.0);
    assert!(
        rows > 0 && rows < BATCHES * ROWS,
        "the filter keeps some rows: {rows}"
    );
    assert_eq!(ours[0].schema(), stock[0].schema());

    // The CPU backend gathers nothing: one copy per scan batch at each transition.
    assert_eq!(metric(h2d.as_ref(), "copies"), BATCHES, "uploads");
    assert_eq!(metric(d2h.as_ref(), "copies"), BATCHES, "downloads");
    // Until the device filter reads resident columns, each batch is bridged.
    assert_eq!(metric(resident.as_ref(), "bridged_batches"), BATCHES);
    assert_eq!(metric(resident.as_ref(), "rows_in"), BATCHES * ROWS);
}

#[tokio::test]
async fn transitions_separated_from_their_device_operators_pass_host_batches_through() {
    // A DeviceToHostExec over a node that makes no device batches, and a
    // HostToDeviceExec read by a host consumer: both return their input's rows.
    let d2h = Arc::new(DeviceToHostExec::new(scan(), BackendKind::Cuda));
    let h2d = Arc::new(HostToDeviceExec::new(scan(), BackendKind::Cuda));
    let ctx = SessionContext::new().task_ctx();
    let stock = collect(scan(), Arc::clone(&ctx)).await.unwrap();
    for plan in [d2h as Arc<dyn ExecutionPlan>, h2d] {
        let got = collect(plan, Arc::clone(&ctx)).await.unwrap();
        assert_eq!(
            assert_same_rows("pass-through", &got, &stock, 0.0),
            BATCHES * ROWS
        );
    }
}
