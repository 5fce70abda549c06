//! How the operators feed a device backend, checked without a GPU: a backend that asks
//! for device batches (`DeviceMemory::batching`) receives the filter's input and the
//! join's probe side gathered to that size, the partial aggregate's batches as they come
//! (its device group table is sized for them), and every call on a thread other than
//! the tokio worker polling the query; the CPU backend receives the batches as they
//! come, on the polling thread.
//!
//! The device here is the CPU backend behind a wrapper that reports itself as CUDA with
//! a batch size and records each call (operation, thread and rows); the results must
//! equal the CPU backend's.

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use arrow::array::{Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::{SessionConfig, SessionContext};
use oxidelake_compute::ops::{
    AggregateArgs, CmpOp, ColumnPredicate, EvaluateArgs, JoinArgs, JoinKey, Literal, Predicate,
    VectorDistanceArgs,
};
use oxidelake_compute::{
    AggInput, BackendChoice, GpuFilterExec, GpuHashJoinExec, GpuPartialAggregateExec,
    PartialAggSpec, PartialFunc,
};
use oxidelake_core::{BackendKind, DeviceId, EngineError};
use oxidelake_device::{
    BatchSizes, CpuBackend, DeviceBatch, DeviceBuffer, DeviceMemory, DeviceStream, GpuBackend,
    HostBuffer, JoinTable, MemoryInfo,
};

use super::rows::assert_same_rows;

/// The CPU backend, presented as a device that wants `batching`; records every
/// filter, join build, join probe and aggregate call as (operation, thread, rows).
#[derive(Debug)]
struct RecordingDevice {
    cpu: CpuBackend,
    batching: Option<BatchSizes>,
    calls: Mutex<Vec<(&'static str, ThreadId, usize)>>,
}

impl RecordingDevice {
    fn new(batching: Option<BatchSizes>) -> Arc<Self> {
        Arc::new(Self {
            cpu: CpuBackend::new(),
            batching,
            calls: Mutex::new(Vec::new()),
        })
    }

    /// The (thread, rows) of every `operation` call, in order.
    fn calls(&self, operation: &str) -> Vec<(ThreadId, usize)> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(op, ..)| *op == operation)
            .map(|(_, thread, rows)| (*thread, *rows))
            .collect()
    }

    fn record(&self, operation: &'static str, rows: usize) {
        let thread = std::thread::current().id();
        self.calls.lock().unwrap().push((operation, thread, rows));
    }
}

impl DeviceMemory for RecordingDevice {
    fn kind(&self) -> BackendKind {
        if self.batching.is_some() {
            BackendKind::Cuda
        } else {
            BackendKind::CpuSimd
        }
    }
    fn device(&self) -> DeviceId {
        self.cpu.device()
    }
    fn batching(&self) -> Option<BatchSizes> {
        self.batching
    }
    fn keeps_batches_on_host(&self) -> bool {
        true
    }
    fn memory_info(&self) -> Result<MemoryInfo, EngineError> {
        self.cpu.memory_info()
    }
    fn alloc_device(&self, bytes: usize) -> Result<DeviceBuffer, EngineError> {
        self.cpu.alloc_device(bytes)
    }
    fn alloc_pinned_host(&self, bytes: usize) -> Result<HostBuffer, EngineError> {
        self.cpu.alloc_pinned_host(bytes)
    }
    fn create_stream(&self) -> Result<DeviceStream, EngineError> {
        self.cpu.create_stream()
    }
    fn copy_h2d(
        &self,
        s: &DeviceStream,
        src: &HostBuffer,
        dst: &mut DeviceBuffer,
    ) -> Result<(), EngineError> {
        self.cpu.copy_h2d(s, src, dst)
    }
    fn copy_d2h(
        &self,
        s: &DeviceStream,
        src: &DeviceBuffer,
        dst: &mut HostBuffer,
    ) -> Result<(), EngineError> {
        self.cpu.copy_d2h(s, src, dst)
    }
    fn synchronize(&self, s: &DeviceStream) -> Result<(), EngineError> {
        self.cpu.synchronize(s)
    }
    fn null_count(
        &self,
        s: &DeviceStream,
        validity: &DeviceBuffer,
        offset_bits: usize,
        len_bits: usize,
    ) -> Result<u64, EngineError> {
        self.cpu.null_count(s, validity, offset_bits, len_bits)
    }
}

impl GpuBackend for RecordingDevice {
    fn filter_project(
        &self,
        s: &DeviceStream,
        batch: &DeviceBatch,
        predicates: &[Predicate],
        projection: &[usize],
    ) -> Result<DeviceBatch, EngineError> {
        self.record("filter", batch.num_rows());
        self.cpu.filter_project(s, batch, predicates, projection)
    }
    fn evaluate(
        &self,
        s: &DeviceStream,
        args: EvaluateArgs<'_>,
    ) -> Result<DeviceBatch, EngineError> {
        self.cpu.evaluate(s, args)
    }
    fn aggregate(
        &self,
        s: &DeviceStream,
        args: AggregateArgs<'_>,
    ) -> Result<RecordBatch, EngineError> {
        self.record("aggregate", args.batch.num_rows());
        self.cpu.aggregate(s, args)
    }
    fn build_join_table(
        &self,
        s: &DeviceStream,
        batch: &DeviceBatch,
        key: JoinKey<'_>,
    ) -> Result<JoinTable, EngineError> {
        self.record("build", batch.num_rows());
        self.cpu.build_join_table(s, batch, key)
    }
    fn join(
        &self,
        s: &DeviceStream,
        table: &JoinTable,
        args: JoinArgs<'_>,
    ) -> Result<DeviceBatch, EngineError> {
        self.record("probe", args.probe.num_rows());
        self.cpu.join(s, table, args)
    }
    fn append(
        &self,
        s: &DeviceStream,
        batches: &[DeviceBatch],
        schema: arrow::datatypes::SchemaRef,
    ) -> Result<DeviceBatch, EngineError> {
        self.cpu.append(s, batches, schema)
    }
    fn widen_images(
        &self,
        s: &DeviceStream,
        memory: &mut DeviceBuffer,
        widenings: &[oxidelake_device::device_batch::Widening],
    ) -> Result<(), EngineError> {
        self.cpu.widen_images(s, memory, widenings)
    }
    fn vector_distance(
        &self,
        s: &DeviceStream,
        args: VectorDistanceArgs<'_>,
    ) -> Result<Float64Array, EngineError> {
        self.cpu.vector_distance(s, args)
    }
}

/// `a > 100` over `batches` batches of 1,000 rows.
fn filter(batches: usize, backend: Arc<dyn GpuBackend>) -> Arc<dyn ExecutionPlan> {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
    let parts: Vec<RecordBatch> = (0..batches)
        .map(|b| {
            let start = (b * 1000) as i64;
            let a: Int64Array = (start..start + 1000)
                .map(|v| (v % 3 == 0).then_some(v))
                .collect();
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(a)]).unwrap()
        })
        .collect();
    let source = MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap();
    let predicates = vec![Predicate::from(ColumnPredicate {
        column: 0,
        op: CmpOp::Gt,
        literal: Literal::Int64(100),
    })];
    Arc::new(
        GpuFilterExec::try_new(source, predicates, vec![0], BackendKind::Cuda)
            .unwrap()
            .with_backend(BackendChoice::Fixed(backend)),
    )
}

async fn run(plan: Arc<dyn ExecutionPlan>) -> Vec<RecordBatch> {
    collect(plan, SessionContext::new().task_ctx())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_device_receives_gathered_batches_off_the_polling_thread() {
    let device = RecordingDevice::new(Some(BatchSizes::new(4096).unwrap()));
    let ours = run(filter(10, device.clone())).await;
    let stock = run(filter(10, Arc::new(CpuBackend::new()))).await;
    assert_same_rows("gathered filter", &ours, &stock, 0.0);
    let calls = device.calls("filter");
    let sizes: Vec<usize> = calls.iter().map(|(_, rows)| *rows).collect();
    assert_eq!(
        sizes,
        vec![4096, 4096, 1808],
        "10 batches of 1,000 gathered to 4,096"
    );
    let polling = std::thread::current().id();
    assert!(
        calls.iter().all(|(thread, _)| *thread != polling),
        "device calls leave the thread polling the query"
    );
}

#[tokio::test]
async fn the_cpu_receives_the_scan_batches_as_they_come_on_the_polling_thread() {
    let cpu = RecordingDevice::new(None);
    run(filter(10, cpu.clone())).await;
    let calls = cpu.calls("filter");
    assert_eq!(
        calls.iter().map(|(_, rows)| *rows).collect::<Vec<_>>(),
        vec![1000; 10]
    );
    let polling = std::thread::current().id();
    assert!(calls.iter().all(|(thread, _)| *thread == polling));
}

/// `batches` scan batches of 1,000 rows `(k, a)`, k cycling through 0..10 (NULL every
/// seventh row), a counting up.
fn keyed_source(batches: usize) -> Arc<dyn ExecutionPlan> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, false),
    ]));
    let parts: Vec<RecordBatch> = (0..batches)
        .map(|b| {
            let start = (b * 1000) as i64;
            let k: Int64Array = (start..start + 1000)
                .map(|v| (v % 7 != 0).then_some(v % 10))
                .collect();
            let a = Int64Array::from((start..start + 1000).collect::<Vec<_>>());
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(k), Arc::new(a)]).unwrap()
        })
        .collect();
    MemorySourceConfig::try_new_exec(&[parts], schema, None).unwrap()
}

/// An inner join of 10 build rows (keys 0..10) with `probe_batches` batches on `k`.
fn join(probe_batches: usize, backend: Arc<dyn GpuBackend>) -> Arc<dyn ExecutionPlan> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("tag", DataType::Int64, false),
    ]));
    let build = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from((0..10).collect::<Vec<i64>>())),
            Arc::new(Int64Array::from((100..110).collect::<Vec<i64>>())),
        ],
    )
    .unwrap();
    let build = MemorySourceConfig::try_new_exec(&[vec![build]], schema, None).unwrap();
    Arc::new(
        GpuHashJoinExec::try_new(build, keyed_source(probe_batches), 0, 0, BackendKind::Cuda)
            .unwrap()
            .with_backend(BackendChoice::Fixed(backend)),
    )
}

/// `SUM(a) GROUP BY k`, the partial half, over `batches` scan batches.
fn partial_sum(batches: usize, backend: Arc<dyn GpuBackend>) -> Arc<dyn ExecutionPlan> {
    let states = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("sum(a)[sum]", DataType::Int64, true),
    ]));
    let sum = PartialAggSpec {
        func: PartialFunc::Sum,
        input: Some(AggInput {
            column: 1,
            cast: None,
        }),
    };
    Arc::new(
        GpuPartialAggregateExec::try_new(
            keyed_source(batches),
            vec![0],
            vec![sum],
            states,
            BackendKind::Cuda,
        )
        .unwrap()
        .with_backend(BackendChoice::Fixed(backend)),
    )
}

#[tokio::test]
async fn a_device_join_builds_once_and_probes_gathered_batches_off_the_polling_thread() {
    let device = RecordingDevice::new(Some(BatchSizes::new(4096).unwrap()));
    // A session batch size under the gathered probe's: the output comes in slices of it.
    let small = SessionContext::new_with_config(SessionConfig::new().with_batch_size(1000));
    let ours = collect(join(10, device.clone()), small.task_ctx())
        .await
        .unwrap();
    assert!(
        ours.iter().all(|b| b.num_rows() <= 1000),
        "output batches at most the session's batch size: {:?}",
        ours.iter().map(RecordBatch::num_rows).collect::<Vec<_>>()
    );
    let stock = run(join(10, Arc::new(CpuBackend::new()))).await;
    assert_same_rows("gathered join", &ours, &stock, 0.0);
    let (build, probe) = (device.calls("build"), device.calls("probe"));
    assert_eq!(
        probe.iter().map(|(_, rows)| *rows).collect::<Vec<_>>(),
        vec![4096, 4096, 1808],
        "10 probe batches of 1,000 gathered to 4,096"
    );
    assert_eq!(build.len(), 1);
    let polling = std::thread::current().id();
    assert!(
        build
            .iter()
            .chain(&probe)
            .all(|(thread, _)| *thread != polling),
        "the build and every probe leave the thread polling the query"
    );

    let cpu = RecordingDevice::new(None);
    run(join(10, cpu.clone())).await;
    let probe = cpu.calls("probe");
    assert_eq!(
        probe.iter().map(|(_, rows)| *rows).collect::<Vec<_>>(),
        vec![1000; 10]
    );
    assert!(probe.iter().all(|(thread, _)| *thread == polling));
}

#[tokio::test]
async fn a_device_partial_aggregate_takes_the_scan_batches_ungathered_off_the_polling_thread() {
    let device = RecordingDevice::new(Some(BatchSizes::new(4096).unwrap()));
    let ours = run(partial_sum(10, device.clone())).await;
    let stock = run(partial_sum(10, Arc::new(CpuBackend::new()))).await;
    assert_same_rows("partial aggregate", &ours, &stock, 0.0);
    let calls = device.calls("aggregate");
    assert_eq!(
        calls.iter().map(|(_, rows)| *rows).collect::<Vec<_>>(),
        vec![1000; 10],
        "one device call per scan batch: its group table is sized for them"
    );
    let polling = std::thread::current().id();
    assert!(calls.iter().all(|(thread, _)| *thread != polling));
}
