//! Whether this process may use io_uring, and the ring setup shared by the probe and the
//! store.

use std::io;

use io_uring::{IoUring, Probe, opcode};

/// Submission-queue entries of the throw-away ring [`probe`] opens.
const PROBE_ENTRIES: u32 = 2;

/// Why io_uring cannot be used by this process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UringUnavailable {
    /// `io_uring_setup(2)` was refused: a seccomp filter, `kernel.io_uring_disabled`, a
    /// kernel without io_uring (ENOSYS) or a locked-memory limit (ENOMEM).
    #[error("io_uring_setup failed with {}: {source}", errno_label(.source))]
    Setup {
        /// The system call's error.
        #[source]
        source: io::Error,
    },
    /// `IORING_REGISTER_PROBE` failed, so the supported opcodes are unknown.
    #[error("io_uring opcode probe failed with {}: {source}", errno_label(.source))]
    Probe {
        /// The system call's error.
        #[source]
        source: io::Error,
    },
    /// The kernel's io_uring lacks an opcode the store submits (both need Linux 5.6).
    #[error("io_uring lacks the {opcode} opcode")]
    MissingOpcode {
        /// The opcode's kernel name.
        opcode: &'static str,
    },
}

impl UringUnavailable {
    /// The errno the kernel answered with, where a system call failed.
    pub fn errno(&self) -> Option<i32> {
        match self {
            UringUnavailable::Setup { source } | UringUnavailable::Probe { source } => {
                source.raw_os_error()
            }
            UringUnavailable::MissingOpcode { .. } => None,
        }
    }
}

/// Checks that this process can set up an io_uring and that it supports the opcodes
/// `UringLocalFileSystem` submits; tests call it to skip with the reason.
pub fn probe_io_uring() -> Result<(), UringUnavailable> {
    open_ring(PROBE_ENTRIES).map(drop)
}

/// Sets up a ring of `entries` submission-queue entries and checks its opcodes.
pub(crate) fn open_ring(entries: u32) -> Result<IoUring, UringUnavailable> {
    let ring = IoUring::new(entries).map_err(|source| UringUnavailable::Setup { source })?;
    let mut opcodes = Probe::new();
    ring.submitter()
        .register_probe(&mut opcodes)
        .map_err(|source| UringUnavailable::Probe { source })?;
    let needed = [
        (opcode::Read::CODE, "IORING_OP_READ"),
        (opcode::Write::CODE, "IORING_OP_WRITE"),
    ];
    for (code, name) in needed {
        if !opcodes.is_supported(code) {
            return Err(UringUnavailable::MissingOpcode { opcode: name });
        }
    }
    Ok(ring)
}

fn errno_label(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(errno) => format!("errno {errno} ({})", errno_name(errno)),
        None => "no errno".to_owned(),
    }
}

/// Names of the errnos `io_uring_setup` is documented to return (generic Linux numbering,
/// as on x86-64 and aarch64).
fn errno_name(errno: i32) -> &'static str {
    match errno {
        1 => "EPERM",
        12 => "ENOMEM",
        14 => "EFAULT",
        22 => "EINVAL",
        23 => "ENFILE",
        24 => "EMFILE",
        38 => "ENOSYS",
        _ => "unlisted errno",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_refusal_names_the_errno() {
        let refused = UringUnavailable::Setup {
            source: io::Error::from_raw_os_error(1),
        };
        assert_eq!(refused.errno(), Some(1));
        assert!(refused.to_string().contains("errno 1 (EPERM)"), "{refused}");
    }

    #[test]
    fn probe_either_succeeds_or_reports_an_errno() {
        match probe_io_uring() {
            Ok(()) => {}
            Err(UringUnavailable::MissingOpcode { opcode }) => {
                eprintln!("io_uring lacks {opcode}");
            }
            Err(refused) => assert!(refused.errno().is_some(), "{refused}"),
        }
    }
}
