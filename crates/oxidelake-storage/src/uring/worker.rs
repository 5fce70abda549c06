//! The ring thread: owns the `IoUring`, turns requests into submissions and completions
//! into replies.
//!
//! It always keeps a read of the wake-up pipe in flight, so one `submit_and_wait(1)`
//! waits for whichever comes first: a data completion or a new request.

use std::io::{self, PipeReader};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use io_uring::{IoUring, opcode, types};
use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::sync::oneshot;

use super::channel::{QUEUE_DEPTH_ENTRIES, Request, Shared};
use super::op::{Completion, Op};

/// `user_data` of the wake-up read; data ops use their slot index.
const WAKE_TOKEN: u64 = u64::MAX;

/// Bytes one wake-up read may consume (several wakes coalesce into one completion).
const WAKE_BUF_BYTES: u32 = 64;

/// Data operations in flight at once. One submission entry stays free for the wake-up
/// read, and the completion queue (twice the submission queue) cannot overflow.
const MAX_IN_FLIGHT_OPS: usize = QUEUE_DEPTH_ENTRIES as usize - 1;

/// Where the wake-up read stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// Not in flight; armed at the top of the next loop.
    Idle,
    /// In flight.
    Armed,
    /// The write end closed (every handle dropped), or the pipe failed.
    Closed,
}

/// The ring thread's state.
pub(crate) struct Worker {
    ring: IoUring,
    requests: mpsc::Receiver<Request>,
    disconnected: bool,
    /// In-flight requests by slot; a slot's op owns the memory its entry points at.
    slots: Vec<Option<Request>>,
    free_slots: Vec<usize>,
    wake_reader: PipeReader,
    wake_buf: Box<[u8]>,
    wake: Wake,
    shared: Arc<Shared>,
    reaped: Vec<(u64, i32)>,
}

impl Worker {
    /// A worker for `ring`, fed by `requests` and woken through `wake_reader`.
    pub(crate) fn new(
        ring: IoUring,
        requests: mpsc::Receiver<Request>,
        wake_reader: PipeReader,
        shared: Arc<Shared>,
    ) -> Self {
        Worker {
            ring,
            requests,
            disconnected: false,
            slots: (0..MAX_IN_FLIGHT_OPS).map(|_| None).collect(),
            free_slots: (0..MAX_IN_FLIGHT_OPS).rev().collect(),
            wake_reader,
            wake_buf: vec![0; WAKE_BUF_BYTES as usize].into_boxed_slice(),
            wake: Wake::Idle,
            shared,
            reaped: Vec::with_capacity(2 * QUEUE_DEPTH_ENTRIES as usize),
        }
    }

    /// Runs until every handle is dropped and every operation has completed.
    pub(crate) fn run(mut self) {
        loop {
            self.arm_wake();
            self.admit_requests();
            let in_flight = MAX_IN_FLIGHT_OPS - self.free_slots.len();
            if in_flight == 0 && self.wake != Wake::Armed {
                if self.disconnected && self.wake == Wake::Closed {
                    return;
                }
                // Nothing can complete: only the channel can bring work.
                match self.requests.blocking_recv() {
                    Some(request) => self.push(request),
                    None => self.disconnected = true,
                }
                continue;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(err) if is_transient(&err) => {}
                Err(err) => return self.fail(err),
            }
            self.reap();
        }
    }

    fn arm_wake(&mut self) {
        if self.wake != Wake::Idle {
            return;
        }
        let entry = opcode::Read::new(
            types::Fd(self.wake_reader.as_raw_fd()),
            self.wake_buf.as_mut_ptr(),
            WAKE_BUF_BYTES,
        )
        .build()
        .user_data(WAKE_TOKEN);
        // SAFETY: `wake_buf` is a heap allocation of WAKE_BUF_BYTES owned by the worker and
        // not touched again until the completion tagged WAKE_TOKEN is reaped (`fail` leaks
        // it if that never happens); the pipe's read end lives as long as the worker.
        if unsafe { self.ring.submission().push(&entry) }.is_ok() {
            self.wake = Wake::Armed;
        }
    }

    /// Moves requests from the channel into the ring while slots are free.
    fn admit_requests(&mut self) {
        while !self.free_slots.is_empty() && !self.disconnected {
            match self.requests.try_recv() {
                Ok(request) => self.push(request),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => self.disconnected = true,
            }
        }
    }

    fn push(&mut self, request: Request) {
        let Request { mut op, reply } = request;
        let Some(slot) = self.free_slots.pop() else {
            // Callers push only into a free slot; answer rather than lose the request.
            return reject(op, reply);
        };
        let entry = op.entry(slot as u64);
        self.slots[slot] = Some(Request { op, reply });
        // SAFETY: the entry points into the heap memory of the op now stored in
        // `slots[slot]`, which is neither mutated nor dropped until the completion tagged
        // `slot` is reaped (or is leaked by `fail`); the op's `Arc<File>` keeps the
        // descriptor open.
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            // A full submission queue (it is flushed every loop, so not expected): the
            // kernel never saw the entry, so the op's memory may be released.
            if let Some(Request { op, reply }) = self.slots[slot].take() {
                self.free_slots.push(slot);
                reject(op, reply);
            }
        }
    }

    fn reap(&mut self) {
        self.reaped.clear();
        self.reaped.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result())),
        );
        for index in 0..self.reaped.len() {
            let (token, result) = self.reaped[index];
            if token == WAKE_TOKEN {
                self.on_wake(result);
            } else {
                self.on_op(token, result);
            }
        }
    }

    fn on_wake(&mut self, result: i32) {
        self.wake = match result {
            0 => Wake::Closed,
            bytes if bytes > 0 => Wake::Idle,
            errno if is_transient(&io::Error::from_raw_os_error(errno.saturating_neg())) => {
                Wake::Idle
            }
            errno => {
                tracing::warn!(
                    errno = -errno,
                    "io_uring wake-up pipe failed; waking by channel"
                );
                Wake::Closed
            }
        };
        // Cleared before the channel is next drained (see `RingInner::wake`).
        self.shared.wake_pending.swap(false, Ordering::AcqRel);
    }

    fn on_op(&mut self, token: u64, result: i32) {
        let Some(slot) = usize::try_from(token)
            .ok()
            .filter(|&s| s < self.slots.len())
        else {
            tracing::warn!(token, "io_uring completion for an unknown slot");
            return;
        };
        let Some(Request { op, reply }) = self.slots[slot].take() else {
            tracing::warn!(slot, "io_uring completion for an empty slot");
            return;
        };
        self.free_slots.push(slot);
        self.shared.ops_completed.fetch_add(1, Ordering::Relaxed);
        // An error means the caller dropped its future; the op's memory is freed here.
        let _ = reply.send(op.complete(result));
    }

    /// The ring failed: callers get `RingStopped`; memory the kernel may still write to is
    /// leaked rather than freed under it.
    fn fail(mut self, err: io::Error) {
        tracing::error!(%err, "io_uring_enter failed; the io_uring thread stops");
        for Request { op, reply } in self.slots.drain(..).flatten() {
            std::mem::forget(op);
            drop(reply);
        }
        if self.wake == Wake::Armed {
            std::mem::forget(std::mem::take(&mut self.wake_buf));
        }
    }
}

/// Answers a request the ring could not take.
fn reject(op: Op, reply: oneshot::Sender<Completion>) {
    let _ = reply.send(Completion {
        op,
        result: Err(io::ErrorKind::ResourceBusy.into()),
    });
}

/// Errors after which waiting again is right: a signal, or a full completion queue.
fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::ResourceBusy
    )
}
