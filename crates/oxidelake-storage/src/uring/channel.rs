//! What the ring's handle and its thread exchange: the requests sent to the thread and
//! the state both read, apart from either side so that each imports only this.

use std::sync::atomic::{AtomicBool, AtomicU64};

use tokio::sync::oneshot;

use super::op::{Completion, Op};

/// Submission-queue entries of the store's ring (the completion queue gets twice as many).
pub(crate) const QUEUE_DEPTH_ENTRIES: u32 = 64;

/// One operation for the ring thread and where to send its completion.
#[derive(Debug)]
pub(crate) struct Request {
    /// The operation, owning its buffers.
    pub(crate) op: Op,
    /// Where the completion goes; dropped unsent if the ring fails.
    pub(crate) reply: oneshot::Sender<Completion>,
}

/// State the handle and the ring thread share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Set by the submitter that wrote a wake-up byte; cleared by the thread when it
    /// consumes the bytes, before it looks at the channel again.
    pub(crate) wake_pending: AtomicBool,
    /// Data operations the kernel has completed.
    pub(crate) ops_completed: AtomicU64,
}
