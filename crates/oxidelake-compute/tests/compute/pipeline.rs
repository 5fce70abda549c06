//! The CUDA operators' data path on the emulated driver (tools/cuda-emu): scan-sized
//! batches are gathered to the device batch size, host batches cross to the device once
//! per call with only the columns the operator reads, device batches stay there between
//! the transitions, and device memory comes back to its pool.
//!
//! The emulator's stream trace and allocation counters are process-wide, so
//! `scripts/test-cuda-emulated.sh` runs this module on its own, one test at a time. On a
//! real driver those hooks do not exist: each test says so and returns.

mod resident_join;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal, Predicate};
use oxidelake_compute::{BackendChoice, GpuFilterExec};
use oxidelake_core::{BackendKind, TelemetryHub};
use oxidelake_device::{BatchSizes, CpuBackend, CudaBackend};

use super::emu;
use super::plans::{cpu, download, gpu_projection, upload};
use super::rows::assert_same_rows;

/// Scan-sized input batches of this many rows...
const SCAN_ROWS: usize = 1024;
/// ...gathered to device batches of this many.
const BATCH_ROWS: usize = 4 * SCAN_ROWS;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

/// `batches` scan batches: `a` counts up (every 7th NULL), `s` is "row<a>" in six
/// digits (equal widths: every device batch then has the same string staging size).
fn scan(batches: usize) -> Arc<dyn ExecutionPlan> {
    let schema = schema();
    let parts: Vec<RecordBatch> = (0..batches)
        .map(|b| {
            let start = (b * SCAN_ROWS) as i64;
            let a: Int64Array = (start..start + SCAN_ROWS as i64)
                .map(|v| (v % 7 != 0).then_some(v))
                .collect();
            let s: StringArray = (start..start + SCAN_ROWS as i64)
                .map(|v| Some(format!("row{v:06}")))
                .collect();
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(a), Arc::new(s)]).unwrap()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap()
}

/// `a > 1000 AND s LIKE 'row%3%'` over `batches` scan batches, on `backend`.
fn filter(batches: usize, backend: BackendChoice) -> Arc<dyn ExecutionPlan> {
    filter_above(1000, batches, backend)
}

/// `a > min_a AND s LIKE 'row%3%'` (each `min_a` is another program, so another key).
fn filter_above(min_a: i64, batches: usize, backend: BackendChoice) -> Arc<dyn ExecutionPlan> {
    filter_over(scan(batches), min_a, backend)
}

/// `a > min_a AND s LIKE 'row%3%'` over `input`.
fn filter_over(
    input: Arc<dyn ExecutionPlan>,
    min_a: i64,
    backend: BackendChoice,
) -> Arc<dyn ExecutionPlan> {
    let predicates = vec![
        Predicate::from(ColumnPredicate {
            column: 0,
            op: CmpOp::Gt,
            literal: Literal::Int64(min_a),
        }),
        Predicate::Like {
            column: 1,
            pattern: "row%3%".into(),
            negated: false,
        },
    ];
    Arc::new(
        GpuFilterExec::try_new(input, predicates, vec![0, 1], BackendKind::Cuda)
            .unwrap()
            .with_backend(backend),
    )
}

async fn run(plan: Arc<dyn ExecutionPlan>) -> Vec<RecordBatch> {
    collect(plan, SessionContext::new().task_ctx())
        .await
        .unwrap()
}

fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    plan.metrics()
        .and_then(|m| m.sum_by_name(name))
        .map(|v| v.as_usize())
        .unwrap_or(0)
}

/// A CUDA backend with small device batches, so a test's scan batches make several.
fn cuda() -> Arc<CudaBackend> {
    Arc::new(
        CudaBackend::try_new(0)
            .unwrap()
            .with_batching(BatchSizes::new(BATCH_ROWS).unwrap()),
    )
}

fn emulator_missing() -> bool {
    if emu::has_trace() {
        return false;
    }
    eprintln!("skipping: libcuda is not the emulated driver (no oxide_emu_trace_text)");
    true
}

/// How many times the emulator traced a launch of `kernel`.
fn launches(kernel: &str) -> usize {
    let op = format!("launch {kernel}");
    emu::trace_lines()
        .into_iter()
        .filter(|(_, traced)| *traced == op)
        .count()
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_filter_over_host_batches_uploads_only_its_predicate_columns_once_per_gathered_batch() {
    if emulator_missing() {
        return;
    }
    let batches = 40;
    let only_a = || {
        vec![Predicate::from(ColumnPredicate {
            column: 0,
            op: CmpOp::Gt,
            literal: Literal::Int64(1000),
        })]
    };
    let on = |backend: BackendChoice| -> Arc<dyn ExecutionPlan> {
        Arc::new(
            GpuFilterExec::try_new(scan(batches), only_a(), vec![0, 1], BackendKind::Cuda)
                .unwrap()
                .with_backend(backend),
        )
    };
    let plan = on(BackendChoice::Fixed(cuda()));
    emu::trace(true);
    let ours = run(Arc::clone(&plan)).await;
    emu::trace(false);
    let stock = run(on(cpu())).await;
    let rows = assert_same_rows("host-batch filter", &ours, &stock, 0.0);
    assert!(rows > 0, "the filter keeps some rows");
    assert_eq!(
        metric(&plan, "cpu_fallback_batches"),
        0,
        "every batch ran on the device"
    );
    let device_calls = batches * SCAN_ROWS / BATCH_ROWS;
    assert_eq!(
        launches("eval_predicates"),
        device_calls,
        "one program run per call"
    );
    assert_eq!(
        launches("gather_8byte"),
        device_calls,
        "per call only the kept row numbers are gathered on the device"
    );
    assert_eq!(
        launches("gather_string_bytes") + launches("gather_string_lengths"),
        0,
        "the projected strings never cross the bus: they are taken on the host"
    );
}

/// The copies the emulator traced: `h2d` and `d2h` operations, in order.
fn traced_copies() -> Vec<String> {
    emu::trace_lines()
        .into_iter()
        .map(|(_, op)| op)
        .filter(|op| op == "h2d" || op == "d2h")
        .collect()
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_device_batch_crosses_in_one_copy_each_way_and_comes_back_exact() {
    if emulator_missing() {
        return;
    }
    use oxidelake_device::DeviceMemory;
    use oxidelake_device::device_batch;
    let backend = cuda();
    let stream = backend.create_stream().unwrap();
    let scan = scan(3);
    let batches = run(scan).await;
    let batch = arrow::compute::concat_batches(&schema(), &batches).unwrap();
    emu::trace(true);
    let on_device = device_batch::upload(backend.as_ref(), &stream, &batch).unwrap();
    let back = device_batch::download(backend.as_ref(), &stream, &on_device).unwrap();
    emu::trace(false);
    assert_eq!(
        back, batch,
        "the round trip is exact (NULLs and strings included)"
    );
    assert_eq!(
        traced_copies(),
        ["h2d", "d2h"],
        "two columns, NULLs and strings: one copy each way"
    );
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn close_lying_images_cross_the_bus_as_narrow_offsets_and_widen_on_the_device_exact() {
    if emulator_missing() {
        return;
    }
    use arrow::array::AsArray;
    use oxidelake_device::DeviceMemory;
    use oxidelake_device::device_batch::{self, size_class};
    let backend = cuda();
    let stream = backend.create_stream().unwrap();
    let batches = run(mixed_scan(40)).await;
    let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let rows = batch.num_rows();
    let h2d = || TelemetryHub::global().snapshot().transfers.h2d_bytes as usize;
    let before = h2d();
    emu::trace(true);
    let on_device = device_batch::upload(backend.as_ref(), &stream, &batch).unwrap();
    let up = h2d() - before;
    let back = device_batch::download(backend.as_ref(), &stream, &on_device).unwrap();
    emu::trace(false);
    assert_eq!(back, batch, "every image exact after its widening");
    assert_eq!(
        launches("widen_images"),
        3,
        "the keys, dates and prices crossed narrow"
    );
    assert_eq!(traced_copies(), ["h2d", "d2h"], "one copy each way");
    assert_eq!(
        on_device.uploaded_bytes(),
        up,
        "the batch knows what crossed"
    );
    // 2-byte keys (0..40,960) and dates (0..400), 4-byte prices (below 100,000), the
    // dates' validity, the strings' offsets and bytes: about half the 8-byte images.
    let strings = batch.column(2).as_string::<i32>().value_data().len() + (rows + 1) * 4;
    let crossed = rows * (2 + 2 + 4) + rows.div_ceil(8) + strings;
    assert!(
        up >= crossed && up <= size_class(crossed + 5 * 128),
        "{up} bytes up for {crossed} of offsets, validity and strings"
    );
    // Through the transitions, in one device batch: the upload's `bytes_moved` is what
    // crossed, not the allocation the narrow columns widen into.
    let one_batch = Arc::new(
        CudaBackend::try_new(0)
            .unwrap()
            .with_batching(BatchSizes::new(1 << 16).unwrap()),
    );
    let h2d_exec = upload(mixed_scan(40), &BackendChoice::Fixed(one_batch));
    let d2h_exec = download(&h2d_exec);
    let before = h2d();
    let through = run(d2h_exec).await;
    let moved = metric(&h2d_exec, "bytes_moved");
    assert_eq!(moved, h2d() - before, "the metric counts what crossed");
    assert_eq!(moved, up, "the same batch crossed as when uploaded alone");
    let through = arrow::compute::concat_batches(&batch.schema(), &through).unwrap();
    assert_eq!(through, batch);
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_kernel_fault_while_widening_an_upload_keeps_the_batch_on_the_host_with_the_answer() {
    if emulator_missing() {
        return;
    }
    let Some(arm) = emu::fault_arm() else {
        return;
    };
    // One device batch of 40,960 rows, whose keys, dates and prices cross narrow: the
    // upload's first launch is a widening, and the fault strikes it (sticky).
    let backend = Arc::new(
        CudaBackend::try_new(0)
            .unwrap()
            .with_batching(BatchSizes::new(1 << 16).unwrap()),
    );
    let fixed = BackendChoice::Fixed(backend);
    let h2d = upload(mixed_scan(40), &fixed);
    let resident = mixed_filter(Arc::clone(&h2d), fixed);
    let d2h = download(&resident);
    arm("kernel:1");
    emu::trace(true);
    let ours = run(Arc::clone(&d2h)).await;
    emu::trace(false);
    arm("");
    let cpu = cpu();
    let stock = run(mixed_filter(mixed_scan(40), cpu)).await;
    assert_same_rows("filter over a failed narrow upload", &ours, &stock, 0.0);
    assert_eq!(
        launches("widen_images"),
        1,
        "the fault struck the first widening"
    );
    assert_eq!(
        metric(&h2d, "device_errors"),
        1,
        "the failed upload is counted"
    );
    assert_eq!(
        metric(&h2d, "cpu_fallback_batches"),
        1,
        "its batch stayed on the host"
    );
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_device_batch_is_in_the_device_gauge_while_it_lives_and_its_pool_while_parked() {
    if emulator_missing() {
        return;
    }
    use oxidelake_device::DeviceMemory;
    use oxidelake_device::device_batch;
    let device = || TelemetryHub::global().snapshot().memory.device_bytes;
    let backend = cuda();
    let stream = backend.create_stream().unwrap();
    let batches = run(scan(2)).await;
    let batch = arrow::compute::concat_batches(&schema(), &batches).unwrap();
    let before = device();
    let on_device = device_batch::upload(backend.as_ref(), &stream, &batch).unwrap();
    assert_eq!(
        device(),
        before + on_device.bytes() as u64,
        "the batch's allocation is counted"
    );
    let bytes = on_device.bytes() as u64;
    drop(on_device);
    assert_eq!(
        backend.device_pool_stats().parked_bytes as u64,
        bytes,
        "the allocation went back to the device pool"
    );
    assert_eq!(
        device(),
        before + bytes,
        "where it still holds device memory"
    );
    drop(backend);
    assert_eq!(device(), before, "freed with the backend's pool");
    // The CPU backend's "device" is host memory: nothing is counted.
    let cpu = CpuBackend::new();
    let cpu_stream = cpu.create_stream().unwrap();
    let on_cpu = device_batch::upload(&cpu, &cpu_stream, &batch).unwrap();
    assert_eq!(device(), before);
    drop(on_cpu);
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_filter_between_transitions_gathers_strings_and_nulls_on_the_device_one_copy_each_way_per_batch()
 {
    if emulator_missing() {
        return;
    }
    let batches = 40;
    let fixed = BackendChoice::Fixed(cuda());
    let h2d = upload(scan(batches), &fixed);
    let resident = filter_over(Arc::clone(&h2d), 1000, fixed.clone());
    let d2h = download(&resident);
    emu::trace(true);
    let ours = run(Arc::clone(&d2h)).await;
    emu::trace(false);
    let stock = run(filter(batches, cpu())).await;
    let rows = assert_same_rows("filter between transitions", &ours, &stock, 0.0);
    assert!(rows > 0);
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    assert_eq!(
        metric(&h2d, "copies"),
        gathered,
        "one upload per device-sized batch"
    );
    assert_eq!(
        metric(&d2h, "copies"),
        gathered,
        "one download per device batch"
    );
    // It projects a string column and one with NULLs: both gathered on the device.
    assert_eq!(metric(&resident, "refused_batches"), 0);
    assert_eq!(metric(&resident, "cpu_fallback_batches"), 0);
    let ops: Vec<String> = emu::trace_lines().into_iter().map(|(_, op)| op).collect();
    let count = |name: &str| ops.iter().filter(|op| op.as_str() == name).count();
    assert_eq!(count("launch gather_string_bytes"), gathered);
    assert_eq!(
        count("launch gather_bits"),
        gathered,
        "the column with NULLs"
    );
    assert_eq!(
        count("d2h"),
        3 * gathered,
        "per batch: the kept count, the string column's byte total, the transition's download"
    );
    assert!(metric(&h2d, "bytes_moved") > 0 && metric(&d2h, "bytes_moved") > 0);
}

/// `batches` scan batches of `k` (Int64), `d` (Date32, every 9th NULL), `s` ("row<k>")
/// and `price` (Decimal128(15, 2)); only `d` has NULLs.
fn mixed_scan(batches: usize) -> Arc<dyn ExecutionPlan> {
    use arrow::array::{Date32Array, Decimal128Array};
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("d", DataType::Date32, true),
        Field::new("s", DataType::Utf8, false),
        Field::new("price", DataType::Decimal128(15, 2), false),
    ]));
    let parts: Vec<RecordBatch> = (0..batches)
        .map(|b| {
            let start = (b * SCAN_ROWS) as i64;
            let keys = start..start + SCAN_ROWS as i64;
            let k = Int64Array::from_iter_values(keys.clone());
            let d: Date32Array = keys
                .clone()
                .map(|v| (v % 9 != 0).then_some((v % 400) as i32))
                .collect();
            let s: StringArray = keys.clone().map(|v| Some(format!("row{v}"))).collect();
            let price =
                Decimal128Array::from_iter_values(keys.map(|v| i128::from(v * 37 % 100_000)))
                    .with_precision_and_scale(15, 2)
                    .unwrap();
            let columns: Vec<arrow::array::ArrayRef> =
                vec![Arc::new(k), Arc::new(d), Arc::new(s), Arc::new(price)];
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap()
}

/// `d > 100 AND s LIKE '%3%' AND price < 600.00`, projecting `price`, `k`.
fn mixed_filter(input: Arc<dyn ExecutionPlan>, backend: BackendChoice) -> Arc<dyn ExecutionPlan> {
    let predicates = vec![
        Predicate::from(ColumnPredicate {
            column: 1,
            op: CmpOp::Gt,
            literal: Literal::Int64(100),
        }),
        Predicate::Like {
            column: 2,
            pattern: "%3%".into(),
            negated: false,
        },
        Predicate::from(ColumnPredicate {
            column: 3,
            op: CmpOp::Lt,
            literal: Literal::Int64(60_000),
        }),
    ];
    Arc::new(
        GpuFilterExec::try_new(input, predicates, vec![3, 0], BackendKind::Cuda)
            .unwrap()
            .with_backend(backend),
    )
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_resident_filter_runs_on_the_device_and_reads_back_only_its_kept_count() {
    if emulator_missing() {
        return;
    }
    let batches = 40;
    let fixed = BackendChoice::Fixed(cuda());
    let h2d = upload(mixed_scan(batches), &fixed);
    let resident = mixed_filter(Arc::clone(&h2d), fixed);
    let d2h = download(&resident);
    emu::trace(true);
    let ours = run(Arc::clone(&d2h)).await;
    emu::trace(false);
    let stock = run(mixed_filter(mixed_scan(batches), cpu())).await;
    let rows = assert_same_rows("resident filter", &ours, &stock, 0.0);
    assert!(rows > 0 && rows < batches * SCAN_ROWS, "{rows}");
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    assert_eq!(
        metric(&resident, "refused_batches"),
        0,
        "no batch went through the host"
    );
    assert_eq!(metric(&resident, "cpu_fallback_batches"), 0);
    let ops: Vec<String> = emu::trace_lines().into_iter().map(|(_, op)| op).collect();
    let count = |name: &str| ops.iter().filter(|op| op.as_str() == name).count();
    assert_eq!(count("launch eval_predicates"), gathered);
    assert_eq!(
        count("launch gather_8byte"),
        2 * gathered,
        "two projected columns"
    );
    assert_eq!(
        count("d2h"),
        2 * gathered,
        "per batch: the filter's kept count, then the transition's one download"
    );
}

/// The emulator's traced operations, with a counter over them.
fn traced_ops() -> impl Fn(&str) -> usize {
    let ops: Vec<String> = emu::trace_lines().into_iter().map(|(_, op)| op).collect();
    move |name: &str| ops.iter().filter(|op| op.as_str() == name).count()
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_projection_above_a_resident_filter_computes_on_the_device_and_reads_back_only_its_overflow_flag()
 {
    if emulator_missing() {
        return;
    }
    let batches = 40;
    let select = "price * CAST(k AS DECIMAL(20, 0)) AS x, k, price";
    let fixed = BackendChoice::Fixed(cuda());
    let h2d = upload(mixed_scan(batches), &fixed);
    let filter = mixed_filter(Arc::clone(&h2d), fixed.clone());
    let resident = gpu_projection(Arc::clone(&filter), select, fixed).await;
    let d2h = download(&resident);
    emu::trace(true);
    let ours = run(Arc::clone(&d2h)).await;
    emu::trace(false);
    let cpu = cpu();
    let stock =
        run(gpu_projection(mixed_filter(mixed_scan(batches), cpu.clone()), select, cpu).await)
            .await;
    let rows = assert_same_rows("projection over a resident filter", &ours, &stock, 0.0);
    assert!(rows > 0 && rows < batches * SCAN_ROWS, "{rows}");
    assert_eq!(ours[0].schema(), stock[0].schema());
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    for (node, name) in [(&filter, "filter"), (&resident, "projection")] {
        assert_eq!(
            metric(node, "refused_batches"),
            0,
            "{name}: no batch via the host"
        );
        assert_eq!(metric(node, "cpu_fallback_batches"), 0, "{name}");
    }
    let count = traced_ops();
    assert_eq!(count("launch eval_values"), gathered, "one computed column");
    assert_eq!(count("launch pack_bits"), gathered, "its validity bitmap");
    assert_eq!(
        count("d2d"),
        2 * gathered,
        "the two passed-through columns (no NULLs) stay on the device"
    );
    assert_eq!(
        count("d2h"),
        3 * gathered,
        "per batch: the filter's kept count, the projection's overflow flag, the one download"
    );
    assert_eq!(metric(&h2d, "copies"), gathered);
    assert_eq!(metric(&d2h, "copies"), gathered);
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_resident_projection_whose_values_outgrow_64_bits_is_copied_back_and_computed_by_datafusion()
 {
    if emulator_missing() {
        return;
    }
    let batches = 8;
    // Every batch holds prices near 1000.00, whose fourth power needs more than 64 bits.
    let select = "price * price * price * price AS x, k";
    let fixed = BackendChoice::Fixed(cuda());
    let h2d = upload(mixed_scan(batches), &fixed);
    let resident = gpu_projection(Arc::clone(&h2d), select, fixed).await;
    let d2h = download(&resident);
    emu::trace(true);
    let ours = run(Arc::clone(&d2h)).await;
    emu::trace(false);
    let cpu = cpu();
    let stock = run(gpu_projection(mixed_scan(batches), select, cpu).await).await;
    assert_eq!(
        assert_same_rows("overflowing projection", &ours, &stock, 0.0),
        batches * SCAN_ROWS
    );
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    assert_eq!(metric(&resident, "refused_batches"), gathered);
    assert_eq!(
        metric(&resident, "cpu_fallback_batches"),
        gathered,
        "DataFusion computed each overflowing batch"
    );
    let count = traced_ops();
    assert_eq!(
        count("launch eval_values"),
        gathered,
        "tried once on the device, not twice"
    );
}

/// `cuMemHostAlloc` calls of an upload and a download of `batches` scan batches
/// (`DeviceToHostExec` over `HostToDeviceExec`; equal string widths, so every device
/// batch has the same size), after a warm-up run; and the plan.
async fn transition_host_allocations(batches: usize) -> (u64, Arc<dyn ExecutionPlan>) {
    let (host, _, plan) = transition_allocations(cuda(), batches).await;
    (host, plan)
}

/// `cuMemHostAlloc` and `cuMemAlloc` calls of an upload, a resident filter and a
/// download of `batches` scan batches on `backend` (as above), after a warm-up run; and
/// the plan.
async fn transition_allocations(
    backend: Arc<CudaBackend>,
    batches: usize,
) -> (u64, u64, Arc<dyn ExecutionPlan>) {
    let fixed = BackendChoice::Fixed(backend);
    let plan = |batches| download(&upload(scan(batches), &fixed));
    run(plan(1)).await;
    let (host_before, device_before) = (
        emu::call_count("cuMemHostAlloc"),
        emu::call_count("cuMemAlloc"),
    );
    let plan = plan(batches);
    let out = run(Arc::clone(&plan)).await;
    assert_eq!(
        out.iter().map(RecordBatch::num_rows).sum::<usize>(),
        batches * SCAN_ROWS
    );
    (
        emu::call_count("cuMemHostAlloc") - host_before,
        emu::call_count("cuMemAlloc") - device_before,
        plan,
    )
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn device_batches_reuse_their_device_allocations_across_hundreds_of_batches() {
    if emulator_missing() {
        return;
    }
    let backend = cuda();
    let (_, first, _) = transition_allocations(Arc::clone(&backend), 100).await;
    let (_, short, _) = transition_allocations(Arc::clone(&backend), 100).await;
    let (_, long, _) = transition_allocations(Arc::clone(&backend), 400).await;
    let gathered = 400 * SCAN_ROWS / BATCH_ROWS;
    eprintln!(
        "device batches: cuMemAlloc {first} for the first 100 scan batches, then {short} \
         for 100 and {long} for 400"
    );
    assert!(
        first <= 3,
        "an allocation per device batch in flight: {first}"
    );
    assert_eq!(
        (short, long),
        (0, 0),
        "a warm pool serves every batch: allocations do not grow with the batches"
    );
    let stats = backend.device_pool_stats();
    assert!(stats.reused >= gathered, "{stats:?}");
    assert!(stats.parked_bytes > 0, "{stats:?}");
    // Without the pool every device batch allocates.
    let unpooled = Arc::new(
        CudaBackend::try_new(0)
            .unwrap()
            .with_batching(BatchSizes::new(BATCH_ROWS).unwrap())
            .with_device_pool_bytes(0),
    );
    let (_, each, _) = transition_allocations(unpooled, 400).await;
    assert_eq!(each, gathered as u64, "one cuMemAlloc per device batch");
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn transitions_reuse_their_pinned_staging_across_hundreds_of_batches() {
    if emulator_missing() {
        return;
    }
    let (short, _) = transition_host_allocations(100).await;
    let (long, plan) = transition_host_allocations(400).await;
    eprintln!("transition staging: cuMemHostAlloc {short} for 100 scan batches, {long} for 400");
    let gathered = 400 * SCAN_ROWS / BATCH_ROWS;
    assert!(gathered >= 100, "at least 100 device batches each way");
    assert_eq!(
        short, long,
        "pinned staging allocations do not grow with the number of batches"
    );
    assert!(
        long <= 3,
        "a staging buffer per copy in flight (two uploads, one download): {long}"
    );
    let h2d = Arc::clone(plan.children()[0]);
    for (node, name) in [(&h2d, "upload"), (&plan, "download")] {
        assert_eq!(metric(node, "copies"), gathered, "{name}");
        assert!(metric(node, "staging_allocations") <= 2, "{name}");
    }
}

/// `GROUP BY d` of `input` (`dated_filter`'s output: `d`, `amount`, `k`): SUM(amount),
/// COUNT(*), MIN(k), AVG(amount), placed for cuda on `backend`.
fn partial_by_date(
    input: Arc<dyn ExecutionPlan>,
    backend: BackendChoice,
) -> Arc<dyn ExecutionPlan> {
    use oxidelake_compute::{AggInput, GpuPartialAggregateExec, PartialAggSpec, PartialFunc};
    let of = |func, column: Option<usize>| PartialAggSpec {
        func,
        input: column.map(|column| AggInput { column, cast: None }),
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("d", DataType::Date32, true),
        Field::new("sum", DataType::Decimal128(28, 2), true),
        Field::new("count", DataType::Int64, true),
        Field::new("min", DataType::Int64, true),
        Field::new("avg_count", DataType::UInt64, true),
        Field::new("avg_sum", DataType::Decimal128(28, 2), true),
    ]));
    let aggregates = vec![
        of(PartialFunc::Sum, Some(1)),
        of(PartialFunc::Count, None),
        of(PartialFunc::Min, Some(2)),
        of(PartialFunc::Avg, Some(1)),
    ];
    Arc::new(
        GpuPartialAggregateExec::try_new(input, vec![0], aggregates, schema, BackendKind::Cuda)
            .unwrap()
            .with_backend(backend),
    )
}

/// `batches` scan batches of `d` (Date32, 300 values, every 11th NULL), `s`
/// ("row<k>"), `amount` (Decimal128(18, 2) of both signs, up to about 10^15 units: their
/// high 32 bits matter) and `k` (Int64).
fn ledger_scan(batches: usize) -> Arc<dyn ExecutionPlan> {
    use arrow::array::{Date32Array, Decimal128Array};
    let schema = Arc::new(Schema::new(vec![
        Field::new("d", DataType::Date32, true),
        Field::new("s", DataType::Utf8, false),
        Field::new("amount", DataType::Decimal128(18, 2), false),
        Field::new("k", DataType::Int64, false),
    ]));
    let parts: Vec<RecordBatch> = (0..batches)
        .map(|b| {
            let start = (b * SCAN_ROWS) as i64;
            let keys = start..start + SCAN_ROWS as i64;
            let d: Date32Array = keys
                .clone()
                .map(|v| (v % 11 != 0).then_some((v % 300) as i32))
                .collect();
            let s: StringArray = keys.clone().map(|v| Some(format!("row{v}"))).collect();
            let amount = Decimal128Array::from_iter_values(keys.clone().map(|v| {
                let magnitude = i128::from(v) * 1_000_000_007 % 100_000_000_000_000_000;
                if v % 3 == 0 { -magnitude } else { magnitude }
            }))
            .with_precision_and_scale(18, 2)
            .unwrap();
            let k = Int64Array::from_iter_values(keys);
            let columns: Vec<arrow::array::ArrayRef> =
                vec![Arc::new(d), Arc::new(s), Arc::new(amount), Arc::new(k)];
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap()
}

/// `s LIKE '%3%'` over `ledger_scan`, projecting `d`, `amount`, `k`.
fn dated_filter(input: Arc<dyn ExecutionPlan>, backend: BackendChoice) -> Arc<dyn ExecutionPlan> {
    let predicates = vec![Predicate::Like {
        column: 1,
        pattern: "%3%".into(),
        negated: false,
    }];
    Arc::new(
        GpuFilterExec::try_new(input, predicates, vec![0, 2, 3], BackendKind::Cuda)
            .unwrap()
            .with_backend(backend),
    )
}

/// Partial states merged per key: (sum, count, min, avg count, avg sum), each as text.
fn merged_states(batches: &[RecordBatch]) -> BTreeMap<Option<i32>, [i128; 5]> {
    use arrow::array::{AsArray, Date32Array};
    use arrow::datatypes::{Decimal128Type, Int64Type, UInt64Type};
    let mut out: BTreeMap<Option<i32>, [i128; 5]> = BTreeMap::new();
    for b in batches {
        let d: &Date32Array = b.column(0).as_primitive();
        let sum = b.column(1).as_primitive::<Decimal128Type>();
        let count = b.column(2).as_primitive::<Int64Type>();
        let min = b.column(3).as_primitive::<Int64Type>();
        let avg_count = b.column(4).as_primitive::<UInt64Type>();
        let avg_sum = b.column(5).as_primitive::<Decimal128Type>();
        for row in 0..b.num_rows() {
            let key = d.is_valid(row).then(|| d.value(row));
            let e = out.entry(key).or_insert([0, 0, i128::MAX, 0, 0]);
            use arrow::array::Array;
            if sum.is_valid(row) {
                e[0] += sum.value(row);
            }
            e[1] += i128::from(count.value(row));
            if min.is_valid(row) {
                e[2] = e[2].min(i128::from(min.value(row)));
            }
            if avg_count.is_valid(row) {
                e[3] += i128::from(avg_count.value(row));
            }
            if avg_sum.is_valid(row) {
                e[4] += avg_sum.value(row);
            }
        }
    }
    out
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_partial_aggregate_above_a_resident_filter_groups_on_the_device_and_downloads_only_its_groups()
 {
    if emulator_missing() {
        return;
    }
    let batches = 40;
    let fixed = BackendChoice::Fixed(cuda());
    let h2d = upload(ledger_scan(batches), &fixed);
    let filter = dated_filter(Arc::clone(&h2d), fixed.clone());
    let aggregate = partial_by_date(Arc::clone(&filter), fixed);
    emu::trace(true);
    let ours = run(Arc::clone(&aggregate)).await;
    emu::trace(false);
    let cpu = cpu();
    let stock = run(partial_by_date(
        dated_filter(ledger_scan(batches), cpu.clone()),
        cpu,
    ))
    .await;
    let (ours, stock) = (merged_states(&ours), merged_states(&stock));
    assert!(ours.len() > 100, "{} groups", ours.len());
    assert!(ours.contains_key(&None), "NULL dates are a group");
    assert_eq!(ours, stock, "the partial states merge to the CPU backend's");
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    for (node, name) in [(&filter, "filter"), (&aggregate, "aggregate")] {
        assert_eq!(
            metric(node, "refused_batches"),
            0,
            "{name}: no batch via the host"
        );
        assert_eq!(metric(node, "cpu_fallback_batches"), 0, "{name}");
    }
    assert_eq!(metric(&h2d, "copies"), gathered, "one upload per batch");
    let count = traced_ops();
    assert_eq!(count("launch agg_assign_groups_rows"), gathered);
    assert_eq!(count("launch agg_compact_words"), gathered);
    assert_eq!(
        count("d2h"),
        4 * gathered,
        "per batch: the filter's kept count, the aggregate's overflow flag and group \
         count, and one download of the groups"
    );
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_resident_aggregate_out_of_device_memory_reads_its_batches_back_and_aggregates_them_on_the_cpu()
 {
    if emulator_missing() {
        return;
    }
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::projection::ProjectionExec;
    let Some(arm) = emu::fault_arm() else {
        return;
    };
    let batches = 12;
    let fixed = BackendChoice::Fixed(cuda());
    // The scan's `d`, `amount` and `k`, uploaded, aggregated where they lie.
    let plan = || {
        let scan = ledger_scan(batches);
        let schema = scan.schema();
        let columns = ["d", "amount", "k"]
            .map(|name| (col(name, &schema).unwrap(), name.to_string()))
            .to_vec();
        let narrow: Arc<dyn ExecutionPlan> =
            Arc::new(ProjectionExec::try_new(columns, scan).unwrap());
        let h2d = upload(narrow, &fixed);
        partial_by_date(h2d, fixed.clone())
    };
    let warm = plan();
    let unfailed = merged_states(&run(Arc::clone(&warm)).await);
    assert_eq!(metric(&warm, "cpu_fallback_batches"), 0);
    // The uploads now take their allocations from the device pool the first run filled;
    // every other device allocation fails as out of memory: the group tables'.
    let failing = plan();
    arm("alloc:1+");
    let states = collect(Arc::clone(&failing), SessionContext::new().task_ctx()).await;
    arm("");
    let states = merged_states(&states.expect("the query completes on the CPU"));
    assert_eq!(states, unfailed, "the CPU's states merge to the device's");
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    assert_eq!(
        metric(&failing, "device_errors"),
        gathered,
        "each batch's table failed"
    );
    assert_eq!(metric(&failing, "cpu_fallback_batches"), gathered);
    assert_eq!(
        metric(&failing, "refused_batches"),
        0,
        "out of memory is counted as a device error, not a refusal"
    );
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_batch_the_device_failed_below_runs_on_the_cpu_above_and_its_failure_is_counted_once() {
    if emulator_missing() {
        return;
    }
    let Some(arm) = emu::fault_arm() else {
        return;
    };
    let batches = 12;
    let fixed = BackendChoice::Fixed(cuda());
    // Uploaded, filtered and aggregated where they lie: (the filter, the aggregate).
    let plan = || {
        let h2d = upload(ledger_scan(batches), &fixed);
        let filter = dated_filter(h2d, fixed.clone());
        (Arc::clone(&filter), partial_by_date(filter, fixed.clone()))
    };
    let (_, warm) = plan();
    let unfailed = merged_states(&run(Arc::clone(&warm)).await);
    // Every launch fails: the filter's first one fails its first batch, which it
    // replays on the CPU; the rest of its batches it replays without trying.
    let (filter, failing) = plan();
    arm("launch:1+");
    let states = collect(Arc::clone(&failing), SessionContext::new().task_ctx()).await;
    arm("");
    let states = merged_states(&states.expect("the query completes on the CPU"));
    assert_eq!(states, unfailed, "the CPU's states merge to the device's");
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    assert_eq!(
        metric(&filter, "device_errors"),
        1,
        "one failure, counted once"
    );
    assert_eq!(metric(&filter, "cpu_fallback_batches"), gathered);
    // The aggregate takes the replayed batches on the CPU: it does not call the failed
    // device for them, so it counts no failure of its own.
    assert_eq!(
        metric(&failing, "device_errors"),
        0,
        "the aggregate tried no launch"
    );
    assert_eq!(metric(&failing, "cpu_fallback_batches"), gathered);
}

/// A build side: `id` (every third number below 20,000) and `name` ("n<id>").
fn names() -> Arc<dyn ExecutionPlan> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let ids: Vec<i64> = (0..20_000).step_by(3).collect();
    let names: StringArray = ids.iter().map(|i| Some(format!("n{i}"))).collect();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Int64Array::from(ids)), Arc::new(names)],
    )
    .unwrap();
    MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None).unwrap()
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn semi_and_anti_joins_of_resident_inputs_flag_their_probe_rows_on_the_device_without_pairs()
{
    if emulator_missing() {
        return;
    }
    use datafusion::common::JoinType;
    use oxidelake_compute::GpuHashJoinExec;
    let batches = 40;
    let gathered = batches * SCAN_ROWS / BATCH_ROWS;
    for join_type in [JoinType::RightSemi, JoinType::RightAnti] {
        let fixed = BackendChoice::Fixed(cuda());
        let upload =
            |input: Arc<dyn ExecutionPlan>| -> Arc<dyn ExecutionPlan> { upload(input, &fixed) };
        let join = |build: Arc<dyn ExecutionPlan>,
                    probe: Arc<dyn ExecutionPlan>,
                    backend: BackendChoice| {
            Arc::new(
                GpuHashJoinExec::try_new_with_type(
                    build,
                    probe,
                    0,
                    2,
                    join_type,
                    BackendKind::Cuda,
                )
                .unwrap()
                .with_backend(backend),
            ) as Arc<dyn ExecutionPlan>
        };
        let probe = dated_filter(upload(ledger_scan(batches)), fixed.clone());
        let joined = join(upload(names()), probe, fixed);
        let joined_ref = joined.downcast_ref::<GpuHashJoinExec>().unwrap();
        assert!(joined_ref.gives_device_batches(), "{join_type}");
        let d2h = download(&joined);
        emu::trace(true);
        let ours = run(d2h).await;
        emu::trace(false);
        let cpu = cpu();
        let stock = run(join(
            names(),
            dated_filter(ledger_scan(batches), cpu.clone()),
            cpu,
        ))
        .await;
        let rows = assert_same_rows(&format!("{join_type}"), &ours, &stock, 0.0);
        assert!(rows > 0, "{join_type}");
        assert_eq!(metric(&joined, "refused_batches"), 0, "{join_type}");
        assert_eq!(metric(&joined, "cpu_fallback_batches"), 0, "{join_type}");
        let count = traced_ops();
        assert_eq!(count("launch join_build"), 1, "{join_type}");
        assert_eq!(count("launch join_match_flags"), gathered, "{join_type}");
        assert_eq!(count("launch join_probe_write"), 0, "{join_type}: no pairs");
        // The build side's key column once; per probe batch the filter's kept count, the
        // number of rows the join keeps and the transition's download of its output.
        assert_eq!(count("d2h"), 1 + 3 * gathered, "{join_type}");
    }
}
