//! The handle async code holds on the ring thread: submit an [`Op`], await its
//! [`Completion`].

use std::io::{PipeWriter, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};

use super::channel::{QUEUE_DEPTH_ENTRIES, Request, Shared};
use super::error::UringError;
use super::op::{Completion, Op};
use super::probe::open_ring;
use super::worker::Worker;

/// Requests that may wait for the ring thread before `submit` itself waits for room.
const REQUEST_QUEUE_BOUND_REQUESTS: usize = 256;

/// A cloneable handle on the ring thread; the thread stops when the last clone drops.
#[derive(Clone, Debug)]
pub(crate) struct RingHandle {
    inner: Arc<RingInner>,
}

#[derive(Debug)]
struct RingInner {
    requests: Option<mpsc::Sender<Request>>,
    waker: Option<PipeWriter>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl RingHandle {
    /// Sets up a ring and starts the thread that drives it.
    pub(crate) fn start() -> Result<Self, UringError> {
        let ring = open_ring(QUEUE_DEPTH_ENTRIES)?;
        let (wake_reader, waker) =
            std::io::pipe().map_err(|source| UringError::StartThread { source })?;
        let (requests, receiver) = mpsc::channel(REQUEST_QUEUE_BOUND_REQUESTS);
        let shared = Arc::new(Shared::default());
        let worker = Worker::new(ring, receiver, wake_reader, Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("oxidelake-uring".to_owned())
            .spawn(move || worker.run())
            .map_err(|source| UringError::StartThread { source })?;
        Ok(RingHandle {
            inner: Arc::new(RingInner {
                requests: Some(requests),
                waker: Some(waker),
                shared,
                thread: Some(thread),
            }),
        })
    }

    /// Hands `op` to the ring thread and waits for the kernel to complete it.
    ///
    /// Dropping the returned future does not cancel the operation: the ring thread owns
    /// the op's memory until its completion arrives.
    pub(crate) async fn submit(&self, op: Op) -> Result<Completion, UringError> {
        let requests = self
            .inner
            .requests
            .as_ref()
            .ok_or(UringError::RingStopped)?;
        let (reply, completion) = oneshot::channel();
        requests
            .send(Request { op, reply })
            .await
            .map_err(|_| UringError::RingStopped)?;
        self.inner.wake();
        completion.await.map_err(|_| UringError::RingStopped)
    }

    /// Data operations the kernel has completed on this ring.
    pub(crate) fn ops_completed(&self) -> u64 {
        self.inner.shared.ops_completed.load(Ordering::Relaxed)
    }
}

impl RingInner {
    /// Makes the ring thread look at the channel: one byte on the pipe completes its
    /// pending read. Only the submitter that flips `wake_pending` writes, so the pipe
    /// never fills. The swap is AcqRel so that the thread's clearing swap, if it reads
    /// this `true`, also sees the request this thread sent before it.
    fn wake(&self) {
        if self.shared.wake_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(waker) = &self.waker else {
            return;
        };
        let mut waker: &PipeWriter = waker;
        if waker.write(&[1]).is_err() {
            // The thread has gone (its read end is closed); let a later call try again.
            self.shared.wake_pending.store(false, Ordering::Release);
        }
    }
}

impl Drop for RingInner {
    fn drop(&mut self) {
        // Closing both ends stops the thread: the channel disconnects and the pending
        // pipe read completes with end-of-file. It returns once its in-flight operations
        // have completed, so no buffer is freed under the kernel and no thread leaks.
        drop(self.requests.take());
        drop(self.waker.take());
        if let Some(thread) = self.thread.take() {
            // A panic on the ring thread was already reported by the panic hook.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::fs::File;
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

    use super::*;

    /// A ring, or `None` (with the reason logged) where the kernel refuses io_uring.
    pub(in crate::uring) fn ring_or_skip() -> Option<RingHandle> {
        match RingHandle::start() {
            Ok(ring) => Some(ring),
            Err(err) => {
                eprintln!("io_uring unavailable: {err}; skipping");
                None
            }
        }
    }

    #[tokio::test]
    async fn new_request_completes_while_another_waits_in_the_kernel() {
        let Some(ring) = ring_or_skip() else { return };
        // A read of an empty pipe stays in flight until the pipe gets data or closes.
        let (reader, writer) = std::io::pipe().unwrap();
        let pipe = Arc::new(File::from(OwnedFd::from(reader)));
        let stalled = tokio::spawn({
            let ring = ring.clone();
            async move {
                ring.submit(Op::read(pipe, Vec::with_capacity(8), 0, 8))
                    .await
            }
        });
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(b"payload").unwrap();
        let file = Arc::new(File::open(tmp.path()).unwrap());

        let completion = tokio::time::timeout(
            Duration::from_secs(10),
            ring.submit(Op::read(file, Vec::with_capacity(7), 0, 7)),
        )
        .await
        .expect("a new request must not wait for an unrelated in-flight one")
        .unwrap();

        assert_eq!(completion.result.unwrap(), 7);
        assert_eq!(completion.op.into_read_buffer().unwrap(), b"payload");
        assert!(!stalled.is_finished());
        drop(writer);
        let eof = stalled.await.unwrap().unwrap();
        assert_eq!(
            eof.result.unwrap(),
            0,
            "closing the pipe ends the stalled read"
        );
    }

    #[test]
    fn dropping_the_last_handle_stops_the_ring_thread() {
        let Some(ring) = ring_or_skip() else { return };
        let clone = ring.clone();
        drop(ring);
        let (done, dropped) = std_mpsc::channel();
        let dropper = std::thread::spawn(move || {
            // Drop joins the ring thread, so it returns only once that thread has exited.
            drop(clone);
            done.send(()).unwrap();
        });
        dropped
            .recv_timeout(Duration::from_secs(10))
            .expect("the ring thread must exit when the last handle drops");
        dropper.join().unwrap();
    }
}
