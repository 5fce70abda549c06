//! `UringLocalFileSystem`: an [`ObjectStore`](object_store::ObjectStore) for local files
//! (`file://`) whose data reads and writes are io_uring operations.
//!
//! What goes through the ring and what does not is listed on [`UringLocalFileSystem`].
//!
//! # Data flow
//!
//! ```text
//!  async caller ──Request{op, oneshot}──► bounded mpsc ──► ring thread (owns IoUring)
//!        │          + 1 byte on a pipe ──────────────────►  (pending READ on the pipe
//!        │                                                   wakes submit_and_wait)
//!        ◄──────────── oneshot::Sender<Completion> ◄──────── CQE reaped
//! ```
//!
//! The ring thread parks in `submit_and_wait(1)` with a read of a wake-up pipe always
//! armed, so a new request wakes it even while other operations are in flight. It owns
//! every buffer of an in-flight operation until its completion arrives, so a caller that
//! drops its future never frees memory the kernel still writes to. When the last handle to
//! the ring drops, the pipe's write end closes, the pending read completes with EOF and the
//! thread drains what is in flight, exits and is joined.
//!
//! io_uring needs `unsafe`: a submission hands the kernel raw pointers, and the buffers
//! behind them must outlive the operation. That is why this module, alone in the crate,
//! allows `unsafe_code`; each block says why its invariant holds.
#![allow(unsafe_code)]

mod channel;
mod error;
mod fs;
mod io;
mod op;
mod probe;
mod register;
mod ring;
mod store;
mod worker;

pub use probe::{UringUnavailable, probe_io_uring};
pub use register::register_uring_file_store;
pub use store::UringLocalFileSystem;
