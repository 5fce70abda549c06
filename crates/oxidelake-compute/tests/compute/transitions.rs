//! Device transitions (ADR-0014): on the CPU backend, whose "device" is host memory, the
//! batches between `HostToDeviceExec` and `DeviceToHostExec` stay host batches (nothing
//! is copied) and the operators give their host paths' rows; on a CUDA driver (the
//! emulated one in `scripts/test-cuda-emulated.sh`), the transitions stage their copies
//! through a pool and upload one batch ahead of their consumer.

use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal, Predicate};
use oxidelake_compute::{DeviceToHostExec, GpuFilterExec, HostToDeviceExec, as_segment};
use oxidelake_core::BackendKind;

use super::plans::{cpu, download, gpu_projection, upload};
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
        .with_backend(cpu())
}

/// A CUDA backend (the emulated driver in `scripts/test-cuda-emulated.sh`) whose device
/// batches are the scan's, so that every scan batch is one copy.
#[cfg(feature = "cuda")]
fn device() -> oxidelake_compute::BackendChoice {
    let backend = oxidelake_device::CudaBackend::try_new(0)
        .unwrap()
        .with_batching(oxidelake_device::BatchSizes::new(ROWS).unwrap());
    oxidelake_compute::BackendChoice::Fixed(Arc::new(backend))
}

fn metric(plan: &dyn ExecutionPlan, name: &str) -> usize {
    plan.metrics()
        .and_then(|m| m.sum_by_name(name))
        .map(|v| v.as_usize())
        .unwrap_or(0)
}

#[tokio::test]
async fn on_the_cpu_backend_a_filter_between_transitions_gives_the_host_filters_rows_and_copies_nothing()
 {
    let cpu = cpu();
    let h2d = upload(scan(), &cpu);
    let resident: Arc<dyn ExecutionPlan> = Arc::new(filter(Arc::clone(&h2d)));
    assert!(
        as_segment(&resident).is_some(),
        "the filter hands on device batches"
    );
    let d2h = download(&resident);
    let ctx = SessionContext::new().task_ctx();
    let ours = collect(d2h.clone(), Arc::clone(&ctx)).await.unwrap();
    let stock = collect(Arc::new(filter(scan())), ctx).await.unwrap();
    let rows = assert_same_rows("filter between transitions", &ours, &stock, 0.0);
    assert!(
        rows > 0 && rows < BATCHES * ROWS,
        "the filter keeps some rows: {rows}"
    );
    assert_eq!(ours[0].schema(), stock[0].schema());

    // The CPU backend's batches stay host batches: no copy at either transition; the
    // filter saw every row.
    assert_eq!(metric(h2d.as_ref(), "copies"), 0, "uploads");
    assert_eq!(metric(d2h.as_ref(), "copies"), 0, "downloads");
    assert_eq!(metric(resident.as_ref(), "rows_in"), BATCHES * ROWS);
}

#[cfg(feature = "cuda")]
#[tokio::test]
#[ignore = "needs a CUDA driver (the emulated one: scripts/test-cuda-emulated.sh)"]
async fn a_transition_stages_a_run_of_equal_batches_through_one_buffer_per_copy_in_flight() {
    let h2d = upload(scan(), &device());
    let d2h = download(&h2d);
    let ctx = SessionContext::new().task_ctx();
    let got = collect(d2h.clone(), Arc::clone(&ctx)).await.unwrap();
    let stock = collect(scan(), ctx).await.unwrap();
    assert_eq!(
        assert_same_rows("round trip", &got, &stock, 0.0),
        BATCHES * ROWS
    );
    // The batches are the same size, so one staging buffer per copy in flight serves
    // them all: the upload runs one batch ahead (two at once), the download one at a time.
    for (node, name, in_flight) in [
        (h2d.as_ref(), "upload", 2),
        (d2h.as_ref() as &dyn ExecutionPlan, "download", 1),
    ] {
        assert_eq!(
            metric(node, "copies"),
            BATCHES,
            "{name}: one copy per batch"
        );
        let allocated = metric(node, "staging_allocations");
        assert!(
            (1..=in_flight).contains(&allocated),
            "{name}: {allocated} staging buffers for {BATCHES} batches"
        );
    }
}

#[cfg(feature = "cuda")]
#[tokio::test]
#[ignore = "needs a CUDA driver (the emulated one: scripts/test-cuda-emulated.sh)"]
async fn an_upload_runs_one_batch_ahead_of_its_consumer() {
    use futures::StreamExt;
    let h2d = upload(scan(), &device());
    let ctx = SessionContext::new().task_ctx();
    let mut stream = as_segment(&h2d)
        .unwrap()
        .execute_segment(0, ctx)
        .unwrap()
        .batches;
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first.num_rows(), ROWS);
    // Holding the first batch, without polling for the second: its upload still runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while metric(h2d.as_ref(), "copies") < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    assert_eq!(
        metric(h2d.as_ref(), "copies"),
        2,
        "the second batch was uploaded while the consumer held the first, and no third"
    );
    let rest = stream.count().await;
    assert_eq!(rest, BATCHES - 1);
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

/// `BATCHES` batches of `k` (Int64), `price` (Decimal128(15, 2), every 7th NULL) and `q`
/// (Decimal128(18, 0)): 10^17 in batch 3, so `price * q` needs more than 64 bits there.
fn priced_scan() -> Arc<dyn ExecutionPlan> {
    use arrow::array::Decimal128Array;
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("price", DataType::Decimal128(15, 2), true),
        Field::new("q", DataType::Decimal128(18, 0), false),
    ]));
    let parts: Vec<RecordBatch> = (0..BATCHES)
        .map(|b| {
            let start = (b * ROWS) as i64;
            let keys = start..start + ROWS as i64;
            let k = Int64Array::from_iter_values(keys.clone());
            let price = Decimal128Array::from_iter(
                keys.clone()
                    .map(|v| (v % 7 != 0).then_some(i128::from(v * 37 % 100_000))),
            )
            .with_precision_and_scale(15, 2)
            .unwrap();
            let big = if b == 3 { 10i128.pow(17) } else { 3 };
            let q = Decimal128Array::from_iter_values(keys.map(|v| big + i128::from(v % 5)))
                .with_precision_and_scale(18, 0)
                .unwrap();
            let columns: Vec<arrow::array::ArrayRef> =
                vec![Arc::new(k), Arc::new(price), Arc::new(q)];
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap()
}

#[tokio::test]
async fn a_projection_between_transitions_gives_datafusions_columns_even_past_64_bits() {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Decimal128Type;
    let cpu = cpu();
    let select = "price * q AS x, k, price + price AS y";
    let h2d = upload(priced_scan(), &cpu);
    let resident = gpu_projection(Arc::clone(&h2d), select, cpu.clone()).await;
    assert!(
        as_segment(&resident).is_some(),
        "the projection hands on device batches"
    );
    let d2h = download(&resident);
    let ctx = SessionContext::new().task_ctx();
    let ours = collect(d2h, Arc::clone(&ctx)).await.unwrap();
    let stock = collect(gpu_projection(priced_scan(), select, cpu).await, ctx)
        .await
        .unwrap();
    assert_eq!(
        assert_same_rows("projection between transitions", &ours, &stock, 0.0),
        BATCHES * ROWS
    );
    assert_eq!(ours[0].schema(), stock[0].schema());
    let beyond = ours
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<Decimal128Type>()
                .iter()
                .flatten()
                .collect::<Vec<_>>()
        })
        .filter(|v| i64::try_from(*v).is_err())
        .count();
    assert!(beyond > 0, "batch 3's products came back past 64 bits");
    assert!(
        ours.iter().any(|b| b.column(0).null_count() > 0),
        "NULL prices give NULL products"
    );
    // Batch 3 overflowed its 64-bit arithmetic and DataFusion computed it.
    assert_eq!(metric(resident.as_ref(), "cpu_fallback_batches"), 1);
}
