//! The threads that plan and run queries, with stacks large enough for deep statements.
//!
//! DataFusion plans and evaluates expression trees recursively, so a statement as deep
//! as `crate::MAX_STATEMENT_DEPTH` allows needs far more stack than a thread's default
//! (`crate::deep_statements` says why and how deep). `oxide` runs each command on a
//! thread with a [`PLANNING_STACK_BYTES`] stack ([`run_with_planning_stack`]), and every
//! binary runs operators on tokio threads with [`RUNTIME_STACK_BYTES`] stacks
//! ([`query_runtime`]: `oxide`, the scheduler, the workers, the TUI, the Python API).
//! A thread's stack is reserved address space; only the pages a deep statement touches
//! take memory. Where such threads cannot be started (a tight address-space limit),
//! both fall back to smaller stacks with a warning: deep statements may then overflow,
//! shallow ones run as before.
//!
//! The blocking pool of a [`query_runtime`] keeps tokio's default bound (512 threads).
//! A lower one can deadlock a worker: Ballista writes a map task's output partitions
//! concurrently, each write holding a blocking thread until it ends, a Flight `do_get`
//! holds one for its whole transfer, and local file reads need one each.

use oxidelake_core::EngineError;

/// The stack of the thread `oxide` plans its statements on (1 GiB).
pub const PLANNING_STACK_BYTES: usize = 1 << 30;

/// The stack of each tokio thread that plans or runs queries (256 MiB).
pub const RUNTIME_STACK_BYTES: usize = 256 << 20;

/// A multi-threaded tokio runtime (I/O and time drivers on) for planning and running
/// queries: its threads named `thread_name`, with [`RUNTIME_STACK_BYTES`] stacks, its
/// blocking pool at tokio's default bound. Where threads with such stacks cannot be
/// started (a tight address-space limit), the runtime gets tokio's default stack
/// instead, with a warning, as [`run_with_planning_stack`] falls back: deep statements
/// may then overflow, shallow ones run as before.
pub fn query_runtime(thread_name: &str) -> Result<tokio::runtime::Runtime, EngineError> {
    let build = |stack_bytes: Option<usize>| {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all().thread_name(thread_name);
        if let Some(stack_bytes) = stack_bytes {
            builder.thread_stack_size(stack_bytes);
        }
        builder.build()
    };
    // tokio panics rather than failing when it cannot start its first worker thread,
    // so a thread with the large stack is tried first.
    let large = match std::thread::Builder::new()
        .name(format!("{thread_name}-probe"))
        .stack_size(RUNTIME_STACK_BYTES)
        .spawn(|| {})
    {
        Ok(probe) => probe.join().is_ok(),
        Err(e) => {
            warn_default_stack(&e);
            false
        }
    };
    let built = if large {
        build(Some(RUNTIME_STACK_BYTES)).or_else(|e| {
            warn_default_stack(&e);
            build(None)
        })
    } else {
        build(None)
    };
    built.map_err(|e| EngineError::Internal(format!("tokio runtime: {e}")))
}

fn warn_default_stack(e: &std::io::Error) {
    tracing::warn!(
        stack_mib = RUNTIME_STACK_BYTES >> 20,
        error = %e,
        "cannot start threads with this stack; the query runtime uses the default \
         stack, and deep statements may overflow it"
    );
}

/// Runs `work` on a thread with a [`PLANNING_STACK_BYTES`] stack and returns what it
/// returns; a panic in `work` continues on the caller's thread. Where no such thread
/// can be made (a tight address-space limit), a [`RUNTIME_STACK_BYTES`] one is tried,
/// then the caller's thread.
pub fn run_with_planning_stack<T, F>(work: F) -> Result<T, EngineError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
    for stack_bytes in [PLANNING_STACK_BYTES, RUNTIME_STACK_BYTES] {
        let slot = std::sync::Arc::clone(&work);
        let spawned = std::thread::Builder::new()
            .name("oxide-planner".into())
            .stack_size(stack_bytes)
            .spawn(move || take(&slot).map(|work| work()));
        match spawned {
            Ok(thread) => match thread.join() {
                Ok(Some(answer)) => return Ok(answer),
                Ok(None) => break,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(e) => tracing::warn!(
                stack_mib = stack_bytes >> 20,
                error = %e,
                "cannot start a thread with this stack; deep statements may overflow"
            ),
        }
    }
    // Each thread is joined before the next is tried, so the work is still here unless
    // a thread ran it.
    match take(&work) {
        Some(work) => Ok(work()),
        None => Err(EngineError::Internal(
            "the planning thread ended without running its work".into(),
        )),
    }
}

fn take<F>(slot: &std::sync::Mutex<Option<F>>) -> Option<F> {
    match slot.lock() {
        Ok(mut work) => work.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_runtime_names_its_threads_and_runs_more_than_64_blocking_tasks_at_once() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::time::{Duration, Instant};

        // Each task holds its blocking thread until all have started, as the concurrent
        // writes of a map task's partitions do: a pool bound below `TASKS` (it was 64)
        // leaves the late ones queued behind the waiting ones until the deadline.
        const TASKS: usize = 80;
        let runtime = query_runtime("oxide-test").unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(30);
        let answers = runtime.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    let started = Arc::clone(&started);
                    tokio::task::spawn_blocking(move || {
                        started.fetch_add(1, SeqCst);
                        while started.load(SeqCst) < TASKS && Instant::now() < deadline {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        let all_started = started.load(SeqCst) >= TASKS;
                        (all_started, std::thread::current().name().map(String::from))
                    })
                })
                .collect();
            let mut answers = Vec::new();
            for task in tasks {
                answers.push(task.await.unwrap());
            }
            answers
        });
        let waited_in_vain = answers.iter().filter(|(all, _)| !all).count();
        assert_eq!(
            waited_in_vain, 0,
            "blocking tasks waited 30 s for the others to start"
        );
        assert!(
            answers
                .iter()
                .all(|(_, name)| name.as_deref() == Some("oxide-test"))
        );
    }

    #[test]
    fn work_runs_on_a_thread_with_the_planning_stack() {
        // Deeper than the 2 MiB of a test thread can hold: 64 KiB a level, 256 levels.
        fn deep(levels: usize) -> usize {
            let frame = std::hint::black_box([0_u8; 64 * 1024]);
            if levels == 0 {
                usize::from(frame[0])
            } else {
                deep(levels - 1) + 1 + usize::from(frame[levels % 1024])
            }
        }
        assert_eq!(run_with_planning_stack(|| deep(256)).unwrap(), 256);
        let name =
            run_with_planning_stack(|| std::thread::current().name().map(String::from)).unwrap();
        assert_eq!(name.as_deref(), Some("oxide-planner"));
    }
}
