//! The process's open-file limit, raised for spill files.
//!
//! A spilling hash join keeps each spill file open from when it is written until its pair
//! is joined: 64 files (32 per side) for every partition that spills, so a query on 16
//! partitions needs about a thousand descriptors. Many Linux systems start processes with
//! a soft limit of 1,024 and a hard limit far above it, and the query would then fail with
//! "Too many open files". A session that may spill raises its soft limit towards the hard
//! one, as a server that opens many files does at startup; it never lowers it.

/// The soft limit this process asks for: enough for hundreds of spilling partitions,
/// without taking an unlimited hard limit literally.
pub const WANTED_OPEN_FILES: u64 = 65_536;

/// The soft and hard open-file limits, as `(soft, hard)`, where the platform has them.
pub fn open_file_limits() -> Option<(u64, u64)> {
    platform::limits()
}

/// Raises the soft open-file limit to `min(hard, WANTED_OPEN_FILES)` when it is below
/// that; returns the soft limit in force afterwards (`None` where there is none to read).
/// Failing to raise it is not an error: the limit stays where it was, and a query that
/// needs more files fails with the operating system's "Too many open files".
pub fn raise_open_file_limit() -> Option<u64> {
    let (soft, hard) = platform::limits()?;
    let wanted = hard.min(WANTED_OPEN_FILES);
    if soft >= wanted {
        return Some(soft);
    }
    match platform::set_soft(wanted, hard) {
        Ok(()) => {
            tracing::debug!(from = soft, to = wanted, "raised the open-file limit");
            Some(wanted)
        }
        Err(e) => {
            tracing::debug!(soft, wanted, error = %e, "could not raise the open-file limit");
            Some(soft)
        }
    }
}

#[cfg(unix)]
// `rlim_t` is `u64` on Linux and macOS but not on every Unix, hence the conversions.
#[allow(clippy::useless_conversion)]
mod platform {
    fn current() -> Option<libc::rlimit> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` through a pointer to a live, properly
        // aligned local; RLIMIT_NOFILE is a valid resource on every Unix.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        (rc == 0).then_some(limit)
    }

    pub(super) fn limits() -> Option<(u64, u64)> {
        current().map(|l| (u64::from(l.rlim_cur), u64::from(l.rlim_max)))
    }

    pub(super) fn set_soft(soft: u64, hard: u64) -> std::io::Result<()> {
        let limit = libc::rlimit {
            rlim_cur: libc::rlim_t::from(soft),
            rlim_max: libc::rlim_t::from(hard),
        };
        // SAFETY: setrlimit reads one `rlimit` from a live local; the soft value is at
        // most the hard one, which is the current hard limit (never raised).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

#[cfg(not(unix))]
mod platform {
    pub(super) fn limits() -> Option<(u64, u64)> {
        None
    }

    pub(super) fn set_soft(_soft: u64, _hard: u64) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_never_lowers_the_soft_limit_nor_passes_the_hard_one() {
        let Some((soft, hard)) = open_file_limits() else {
            return;
        };
        let after = raise_open_file_limit().unwrap();
        assert!(after >= soft, "{soft} -> {after}");
        assert!(after <= hard, "{after} over the hard limit {hard}");
        assert_eq!(open_file_limits().unwrap().0, after);
        // A second call changes nothing.
        assert_eq!(raise_open_file_limit(), Some(after));
    }
}
