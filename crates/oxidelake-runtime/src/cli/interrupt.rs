//! Ctrl-C (SIGINT) as an event a running statement can wait for.
//!
//! A thread of its own waits for the signal and wakes the waiting statement directly.
//! tokio's own `signal::ctrl_c` is delivered by the runtime's I/O driver, which only a
//! parked worker polls: while a CPU-bound query keeps every worker busy (two here), the
//! signal would wait until the query ended, which is what Ctrl-C is meant to cut short.

use std::sync::OnceLock;

use tokio::sync::watch;

/// SIGINTs seen so far, counted by the watcher thread (`None`: SIGINT cannot be watched
/// here, and then nothing cancels).
static SIGINTS: OnceLock<Option<watch::Receiver<u64>>> = OnceLock::new();

fn sigints() -> Option<watch::Receiver<u64>> {
    SIGINTS
        .get_or_init(|| {
            let mut signals =
                signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]).ok()?;
            let (count, seen) = watch::channel(0_u64);
            std::thread::Builder::new()
                .name("oxide-sigint".into())
                .spawn(move || {
                    for _ in signals.forever() {
                        // Only the static's own receiver: no statement is running, so
                        // Ctrl-C does what it did before it was watched.
                        if count.receiver_count() <= 1 {
                            std::process::exit(130);
                        }
                        count.send_modify(|n| *n += 1);
                    }
                })
                .ok()?;
            Some(seen)
        })
        .clone()
}

/// Starts watching SIGINT and returns a future that resolves at the next one (it never
/// resolves if SIGINT cannot be watched). A SIGINT while no such future exists ends the
/// process with status 130, as an unwatched one would.
pub fn next_interrupt() -> impl std::future::Future<Output = ()> {
    let receiver = sigints();
    async move {
        let Some(mut receiver) = receiver else {
            return std::future::pending().await;
        };
        // Only a SIGINT after this point counts.
        receiver.borrow_and_update();
        if receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
