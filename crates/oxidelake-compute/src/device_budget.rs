//! The process-wide device memory budget (`oxidelake.memory.device_limit`).
//!
//! One counter per process of the device bytes that operators have claimed for state they
//! are about to put on the device. Every operator and partition claims from the same
//! counter, so two joins on two partitions cannot each take the whole limit. Each claim is
//! checked against the limit of the session it runs for: the device is the process's, and
//! each session says how much of it its queries may hold.
//!
//! Today two kinds of device state claim from it: the build side of each pair the grace
//! join joins on the device (`GraceHashJoinExec` with device pairs), which past the
//! budget is split through spill files until its parts fit, like a build side past the
//! host limit; and a join's build side built on the device from device batches (ADR-0014
//! stage 3), which past the budget is built on the host instead. The latter claims under
//! [`default_device_limit`] when the session sets no limit. The claim is an
//! estimate made before the device allocates (the host bytes of the rows the device table
//! will hold), not a count of the allocations themselves.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use oxidelake_core::BackendKind;
use oxidelake_device::GpuBackend;

/// The share of a device's memory that device state may claim when
/// `oxidelake.memory.device_limit` is not set: the rest is left to device batches in
/// flight, kernels' scratch space and other processes.
pub const DEFAULT_DEVICE_SHARE_PERCENT: u64 = 80;

/// The device limit for state built on `backend` when the session sets none:
/// [`DEFAULT_DEVICE_SHARE_PERCENT`] of the device's memory; `None` on the CPU backend
/// (host memory is the host pool's) or where the backend cannot say.
pub fn default_device_limit(backend: &dyn GpuBackend) -> Option<usize> {
    if backend.kind() == BackendKind::CpuSimd {
        return None;
    }
    let total = backend.memory_info().ok()?.total_bytes;
    usize::try_from(total / 100 * DEFAULT_DEVICE_SHARE_PERCENT).ok()
}

/// The bytes claimed on the device by every operator of the process.
pub struct DeviceBudget {
    claimed: AtomicUsize,
}

static GLOBAL: DeviceBudget = DeviceBudget {
    claimed: AtomicUsize::new(0),
};

impl DeviceBudget {
    /// The process's budget.
    pub fn global() -> &'static DeviceBudget {
        &GLOBAL
    }

    /// Bytes claimed now, by all operators.
    pub fn claimed(&self) -> usize {
        self.claimed.load(Ordering::Acquire)
    }

    /// An empty claim, grown with [`DeviceClaim::try_grow`] and returned when dropped.
    pub fn claim(&'static self) -> DeviceClaim {
        DeviceClaim {
            budget: self,
            bytes: 0,
        }
    }
}

impl fmt::Debug for DeviceBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBudget")
            .field("claimed", &self.claimed())
            .finish()
    }
}

/// Bytes one operator has claimed from the [`DeviceBudget`]; returned when dropped.
#[derive(Debug)]
pub struct DeviceClaim {
    budget: &'static DeviceBudget,
    bytes: usize,
}

impl DeviceClaim {
    /// Claims `bytes` more if every claim of the process then stays within `limit`;
    /// claims nothing and returns false otherwise.
    pub fn try_grow(&mut self, bytes: usize, limit: usize) -> bool {
        let claimed =
            self.budget
                .claimed
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                    now.checked_add(bytes).filter(|total| *total <= limit)
                });
        if claimed.is_ok() {
            self.bytes += bytes;
        }
        claimed.is_ok()
    }

    /// Bytes this claim holds.
    pub fn size(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        self.budget.claimed.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_backend_has_no_default_device_limit() {
        assert_eq!(
            default_device_limit(&oxidelake_device::CpuBackend::new()),
            None
        );
    }

    #[test]
    fn claims_share_one_limit_and_return_their_bytes_when_dropped() {
        // A budget of its own: the global one is shared with other tests.
        static BUDGET: DeviceBudget = DeviceBudget {
            claimed: AtomicUsize::new(0),
        };
        let mut a = BUDGET.claim();
        let mut b = BUDGET.claim();
        assert!(a.try_grow(600, 1000));
        assert!(!b.try_grow(500, 1000), "the other claim's bytes count");
        assert_eq!(b.size(), 0, "a refused claim takes nothing");
        assert!(b.try_grow(400, 1000));
        assert_eq!(BUDGET.claimed(), 1000);
        assert!(!a.try_grow(1, 1000));
        assert!(
            a.try_grow(1, 2000),
            "each claim is checked against its own limit"
        );
        drop(a);
        assert_eq!(BUDGET.claimed(), 400);
        drop(b);
        assert_eq!(BUDGET.claimed(), 0);
    }
}
