//! Running the engine's futures from Python: on one tokio runtime for the process, with
//! the GIL released, and cancelled by Ctrl-C.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use oxidelake_runtime::EngineError;
use pyo3::prelude::*;

/// How often the waiting thread looks for a pending Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("oxidelake")
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            super::error::OxideLakeError::new_err(format!("cannot start the query runtime: {e}"))
        })
}

/// Runs `work` to completion with the GIL released. A Ctrl-C (or any pending signal
/// whose handler raises) cancels it: the task is aborted, which drops the query's
/// streams and stops its operators, and the signal's exception is raised.
pub(super) fn wait<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T, EngineError>> + Send + 'static,
{
    let runtime = runtime()?;
    let mut task = runtime.spawn(work);
    loop {
        let done = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut task).await })
        });
        match done {
            Ok(Ok(result)) => return result.map_err(|e| super::error::to_py(py, &e)),
            Ok(Err(join)) => {
                return Err(super::error::OxideLakeError::new_err(format!(
                    "the query's task ended abnormally: {join}"
                )));
            }
            Err(_still_running) => {
                if let Err(interrupt) = py.check_signals() {
                    task.abort();
                    return Err(interrupt);
                }
            }
        }
    }
}
