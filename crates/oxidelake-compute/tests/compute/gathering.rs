//! How `GpuFilterExec` feeds a device backend, checked without a GPU: a backend that
//! asks for device batches (`GpuBackend::batching`) receives scan batches gathered to
//! that size, on a thread other than the tokio worker polling the query; the CPU
//! backend receives the batches as they come, on the polling thread.
//!
//! The device here is the CPU backend behind a wrapper that reports itself as CUDA with
//! a batch size and records each call (thread and rows); the results must equal the CPU
//! backend's.

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{
    AggregateArgs, CmpOp, ColumnPredicate, EvaluateArgs, FilterProjectArgs, JoinMatches, Literal,
    Predicate, VectorDistanceArgs,
};
use oxidelake_compute::{BackendChoice, GpuFilterExec};
use oxidelake_core::{BackendKind, DeviceId, EngineError};
use oxidelake_device::{
    CpuBackend, DeviceBatching, DeviceBuffer, DeviceStream, GpuBackend, HostBuffer, JoinTable,
    MemoryInfo,
};

use super::rows::assert_same_rows;

/// The CPU backend, presented as a device that wants `batching`; records every
/// `filter_project` call as (thread, input rows).
#[derive(Debug)]
struct RecordingDevice {
    cpu: CpuBackend,
    batching: Option<DeviceBatching>,
    calls: Mutex<Vec<(ThreadId, usize)>>,
}

impl RecordingDevice {
    fn new(batching: Option<DeviceBatching>) -> Arc<Self> {
        Arc::new(Self {
            cpu: CpuBackend::new(),
            batching,
            calls: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> Vec<(ThreadId, usize)> {
        self.calls.lock().unwrap().clone()
    }
}

impl GpuBackend for RecordingDevice {
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
    fn batching(&self) -> Option<DeviceBatching> {
        self.batching
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
    fn filter_project(
        &self,
        s: &DeviceStream,
        args: FilterProjectArgs<'_>,
    ) -> Result<RecordBatch, EngineError> {
        self.calls
            .lock()
            .unwrap()
            .push((std::thread::current().id(), args.batch.num_rows()));
        self.cpu.filter_project(s, args)
    }
    fn evaluate(
        &self,
        s: &DeviceStream,
        args: EvaluateArgs<'_>,
    ) -> Result<Vec<ArrayRef>, EngineError> {
        self.cpu.evaluate(s, args)
    }
    fn build_join_table(
        &self,
        s: &DeviceStream,
        keys: &Int64Array,
    ) -> Result<JoinTable, EngineError> {
        self.cpu.build_join_table(s, keys)
    }
    fn probe_join_table(
        &self,
        s: &DeviceStream,
        table: &JoinTable,
        keys: &Int64Array,
    ) -> Result<JoinMatches, EngineError> {
        self.cpu.probe_join_table(s, table, keys)
    }
    fn aggregate(
        &self,
        s: &DeviceStream,
        args: AggregateArgs<'_>,
    ) -> Result<RecordBatch, EngineError> {
        self.cpu.aggregate(s, args)
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
    let device = RecordingDevice::new(Some(DeviceBatching::new(4096, 1024).unwrap()));
    let ours = run(filter(10, device.clone())).await;
    let stock = run(filter(10, Arc::new(CpuBackend::new()))).await;
    assert_same_rows("gathered filter", &ours, &stock, 0.0);
    let calls = device.calls();
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
    let calls = cpu.calls();
    assert_eq!(
        calls.iter().map(|(_, rows)| *rows).collect::<Vec<_>>(),
        vec![1000; 10]
    );
    let polling = std::thread::current().id();
    assert!(calls.iter().all(|(thread, _)| *thread == polling));
}
