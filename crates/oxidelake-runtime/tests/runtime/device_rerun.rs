//! A query whose device fails before its first row is run again on the CPU placement
//! (issue #45): through `OxideSession::sql_stream`, with a scalar function whose first
//! call fails as a kernel launch on a CUDA device would (no device fault can be injected
//! on a GPU-less machine). Statements that write, and sessions placed on the CPU, get the
//! device error as before.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::AsArray;
use arrow::datatypes::{DataType, Int64Type};
use arrow::record_batch::RecordBatch;
use datafusion::common::utils::take_function_args;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use oxidelake_core::{BackendKind, DeviceId, EngineError, TelemetryHub};
use oxidelake_planner::FixedProbe;
use oxidelake_runtime::{OxideSession, PlacementTarget};

/// `fails_once_on_the_device(v)`: `v`, except that the first call fails as a kernel
/// launch on a CUDA device would. Volatile, so no optimizer evaluates it while planning.
#[derive(Debug)]
struct FailsOnceOnTheDevice {
    signature: Signature,
    calls: Arc<AtomicUsize>,
}

impl PartialEq for FailsOnceOnTheDevice {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.calls, &other.calls)
    }
}

impl Eq for FailsOnceOnTheDevice {}

impl Hash for FailsOnceOnTheDevice {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.calls).hash(state);
    }
}

impl ScalarUDFImpl for FailsOnceOnTheDevice {
    fn name(&self) -> &str {
        "fails_once_on_the_device"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(EngineError::Device {
                device: DeviceId::new(BackendKind::Cuda, 0),
                operation: "cuLaunchKernel".into(),
                detail: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            }
            .into());
        }
        let [v] = take_function_args(self.name(), args.args)?;
        Ok(v)
    }
}

/// A session placed for `target` on a machine whose probe finds `detected`, with
/// `fails_once_on_the_device` registered; the counter of the function's calls.
fn session_with_a_failing_device(
    target: PlacementTarget,
    detected: BackendKind,
) -> (OxideSession, Arc<AtomicUsize>) {
    let session = OxideSession::local_with(target, Arc::new(FixedProbe(detected)));
    let calls = Arc::new(AtomicUsize::new(0));
    session
        .context()
        .register_udf(ScalarUDF::new_from_impl(FailsOnceOnTheDevice {
            signature: Signature::exact(vec![DataType::Int64], Volatility::Volatile),
            calls: Arc::clone(&calls),
        }));
    (session, calls)
}

/// The first column's values over `batches`, in order.
fn int64s(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

const QUERY: &str = "SELECT fails_once_on_the_device(column1) AS v FROM (VALUES (1), (2), (3))";

#[tokio::test]
async fn a_query_whose_device_fails_before_its_first_row_is_answered_by_a_rerun_on_the_cpu() {
    // Placed for cuda explicitly, and by `auto` on a machine with a GPU.
    for (target, detected) in [
        (PlacementTarget::Cuda, BackendKind::CpuSimd),
        (PlacementTarget::Auto, BackendKind::Cuda),
    ] {
        let (session, calls) = session_with_a_failing_device(target, detected);
        let reruns_before = TelemetryHub::global().device_query_reruns();

        let mut stream = session.sql_stream(QUERY).await.unwrap();
        let batches = stream.collect().await.unwrap();

        assert_eq!(int64s(&batches), [1, 2, 3], "{target}");
        assert!(stream.reran_on_cpu(), "{target}");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "{target}: the device run, then the CPU run"
        );
        assert!(
            TelemetryHub::global().device_query_reruns() > reruns_before,
            "{target}"
        );
        assert_eq!(
            session.placement_target(),
            target,
            "the session keeps its placement"
        );
    }
}

#[tokio::test]
async fn a_statement_that_writes_is_not_rerun_after_a_device_failure() {
    let (session, calls) =
        session_with_a_failing_device(PlacementTarget::Cuda, BackendKind::CpuSimd);
    session.sql("CREATE TABLE t (v BIGINT)").await.unwrap();

    let err = session
        .sql("INSERT INTO t SELECT fails_once_on_the_device(column1) FROM (VALUES (1))")
        .await
        .unwrap_err();

    assert!(err.is_device_failure(), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let rows = session.sql("SELECT count(*) FROM t").await.unwrap();
    assert_eq!(int64s(&rows), [0], "nothing was inserted");
}

#[tokio::test]
async fn a_query_placed_on_the_cpu_gets_the_device_error_without_a_rerun() {
    let (session, calls) = session_with_a_failing_device(PlacementTarget::Cpu, BackendKind::Cuda);

    let mut stream = session.sql_stream(QUERY).await.unwrap();
    let err = stream.collect().await.unwrap_err();

    assert!(err.is_device_failure(), "{err}");
    assert!(!stream.reran_on_cpu());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
