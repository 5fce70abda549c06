//! One io_uring data operation: the memory it owns while in flight, its submission
//! entry, and what its completion hands back.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use bytes::Bytes;
use io_uring::{opcode, squeue, types};

/// The most bytes one read or write asks for; longer transfers loop. (The kernel caps a
/// single transfer at 0x7ffff000 bytes anyway, and the length field is a `u32`.)
pub(crate) const MAX_OP_BYTES: u32 = 8 << 20;

/// A data operation and the memory it owns until the kernel completes it.
///
/// The fields are private so that `len_bytes` always describes memory the op owns.
#[derive(Debug)]
pub(crate) struct Op {
    file: Arc<File>,
    kind: OpKind,
    offset_bytes: u64,
    len_bytes: u32,
}

#[derive(Debug)]
enum OpKind {
    /// Read into the spare capacity of the buffer (`len_bytes` of it).
    Read(Vec<u8>),
    /// Write the first `len_bytes` of the data.
    Write(Bytes),
}

/// A finished operation: its memory back, and the kernel's answer.
#[derive(Debug)]
pub(crate) struct Completion {
    /// The operation, with its buffer; a read's buffer has grown by the bytes read.
    pub(crate) op: Op,
    /// Bytes transferred, or the errno.
    pub(crate) result: io::Result<usize>,
}

impl Op {
    /// A read of up to `want_bytes` (capped by `buf`'s spare capacity and
    /// [`MAX_OP_BYTES`]) at `offset_bytes`, appended to `buf`.
    pub(crate) fn read(file: Arc<File>, buf: Vec<u8>, offset_bytes: u64, want_bytes: u64) -> Self {
        let spare = buf.capacity() - buf.len();
        let len_bytes = clamp_len(want_bytes.min(spare as u64));
        Op {
            file,
            kind: OpKind::Read(buf),
            offset_bytes,
            len_bytes,
        }
    }

    /// A write of (up to [`MAX_OP_BYTES`] of) `data` at `offset_bytes`.
    pub(crate) fn write(file: Arc<File>, data: Bytes, offset_bytes: u64) -> Self {
        let len_bytes = clamp_len(data.len() as u64);
        Op {
            file,
            kind: OpKind::Write(data),
            offset_bytes,
            len_bytes,
        }
    }

    /// The read buffer, once the op is done with it (`None` for a write).
    pub(crate) fn into_read_buffer(self) -> Option<Vec<u8>> {
        match self.kind {
            OpKind::Read(buf) => Some(buf),
            OpKind::Write(_) => None,
        }
    }

    /// The submission entry, tagged with `user_data`.
    ///
    /// The entry holds raw pointers into this op's buffer. They stay valid while the op is
    /// alive and unmodified: moving an `Op` moves the `Vec`/`Bytes` handles, not the heap
    /// memory behind them. The ring thread keeps the op until its completion arrives.
    pub(crate) fn entry(&mut self, user_data: u64) -> squeue::Entry {
        let fd = types::Fd(self.file.as_raw_fd());
        let entry = match &mut self.kind {
            OpKind::Read(buf) => {
                let spare = buf.spare_capacity_mut().as_mut_ptr().cast::<u8>();
                opcode::Read::new(fd, spare, self.len_bytes)
                    .offset(self.offset_bytes)
                    .build()
            }
            OpKind::Write(data) => opcode::Write::new(fd, data.as_ptr(), self.len_bytes)
                .offset(self.offset_bytes)
                .build(),
        };
        entry.user_data(user_data)
    }

    /// Turns the result of this op's completion-queue entry into a [`Completion`].
    ///
    /// Call it only with the result of the entry built by [`Op::entry`] for this op.
    pub(crate) fn complete(mut self, result: i32) -> Completion {
        let transferred = match usize::try_from(result) {
            Ok(bytes) => bytes,
            Err(_) => {
                let errno = result.saturating_neg();
                return Completion {
                    op: self,
                    result: Err(io::Error::from_raw_os_error(errno)),
                };
            }
        };
        if transferred > self.len_bytes as usize {
            let err = io::Error::other(format!(
                "io_uring reported {transferred} bytes for a {}-byte request",
                self.len_bytes
            ));
            return Completion {
                op: self,
                result: Err(err),
            };
        }
        if let OpKind::Read(buf) = &mut self.kind {
            let filled = buf.len() + transferred;
            // SAFETY: the kernel wrote `transferred` bytes into the spare capacity starting
            // at `buf.len()` (the pointer `entry` gave it), and `transferred <= len_bytes
            // <= spare capacity`, so the first `filled` bytes are initialised and within
            // the allocation.
            unsafe { buf.set_len(filled) };
        }
        Completion {
            op: self,
            result: Ok(transferred),
        }
    }
}

fn clamp_len(len_bytes: u64) -> u32 {
    u32::try_from(len_bytes.min(u64::from(MAX_OP_BYTES))).unwrap_or(MAX_OP_BYTES)
}
