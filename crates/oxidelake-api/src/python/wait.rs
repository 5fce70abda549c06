//! Running the engine's futures from Python: on one tokio runtime for the process, with
//! the GIL released, and cancelled by Ctrl-C.

use std::future::Future;
use std::sync::OnceLock;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use pyo3::prelude::*;

use super::error::ErrorKind;

/// How often the waiting thread looks for a pending Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            // Queries are planned and run on these threads, recursively over their
            // expression trees (`oxidelake_runtime::MAX_STATEMENT_DEPTH`).
            oxidelake_runtime::query_runtime("oxidelake").map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            super::error::OxideLakeError::new_err(format!("cannot start the query runtime: {e}"))
        })
}

/// Runs `work` to completion with the GIL released. A Ctrl-C (or any pending signal
/// whose handler raises) cancels it: the task is aborted, which drops the query's
/// streams and stops its operators at their next batch, and the signal's exception is
/// raised at once.
///
/// The waiting thread sleeps on a channel with an operating-system timeout rather than
/// on a tokio timer: a query keeps the runtime's worker threads busy, and their timers
/// would fire late.
pub(super) fn wait<T, E, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    E: ErrorKind + Send + 'static,
    F: Future<Output = Result<T, E>> + Send + 'static,
{
    let runtime = runtime()?;
    let (done, mut result) = std::sync::mpsc::sync_channel(1);
    let task = runtime.spawn(async move {
        // The receiver is gone only after a cancellation, when nobody wants the result.
        let _ = done.send(work.await);
    });
    loop {
        // The receiver travels into the GIL-free closure and back (it is Send, not Sync).
        let (received, receiver) = py.detach(move || {
            let received = result.recv_timeout(SIGNAL_POLL);
            (received, result)
        });
        result = receiver;
        match received {
            Ok(result) => return result.map_err(|e| super::error::to_py(py, &e)),
            Err(RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    task.abort();
                    return Err(interrupt);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(super::error::OxideLakeError::new_err(
                    "the query's task ended without a result (it panicked)",
                ));
            }
        }
    }
}
