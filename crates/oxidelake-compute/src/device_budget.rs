//! The process-wide device memory budget (`oxidelake.memory.device_limit`).
//!
//! One counter per process of the device bytes that operators have claimed for state they
//! are about to put on the device. Every operator and partition claims from the same
//! counter, so two joins on two partitions cannot each take the whole limit. Each claim is
//! checked against the limit of the session it runs for: the device is the process's, and
//! each session says how much of it its queries may hold ([`session_device_limit`], read
//! from the task's configuration, so executors of a cluster apply it too). Without a
//! session limit, state on a device claims under [`default_device_limit`].
//!
//! What claims, and what happens past the budget:
//! - the build side of each pair the grace join joins on the device
//!   (`GraceHashJoinExec` with device pairs): split through spill files until its parts
//!   fit, like a build side past the host limit;
//! - a join's build side built on the device, from device batches (ADR-0014 stage 3) or
//!   from host batches (its key column and table): built on the CPU instead, its probes
//!   then joined there (`device_budget_host_builds`); the claim lives as long as the side;
//! - the device state of one call of a partial aggregate, filter, projection or vector
//!   distance over host batches, and of a partial aggregate over a device batch: that
//!   batch runs on the CPU path instead (`device_budget_cpu_batches`); the claim ends with
//!   the call.
//!
//! A claim is an estimate made before the device allocates (the bytes of the rows and
//! tables the call will put there), not a count of the allocations themselves. Device
//! batches in flight between operators are not claimed: their number is bounded by the
//! batch size and the pipelines' depth.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::prelude::SessionConfig;
use oxidelake_core::BackendKind;
use oxidelake_device::GpuBackend;

use crate::OxideOptions;

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

/// The session's `oxidelake.memory.device_limit`, from the [`OxideOptions`] registered
/// in `config` (the task's configuration, so that executors of a cluster apply it too);
/// `None` when unset or when the options are not registered.
///
/// Operators ask once per partition they execute: the value was parsed when it was set,
/// so this is a lookup and a downcast, not a parse.
pub fn session_device_limit(config: &SessionConfig) -> Option<usize> {
    config
        .options()
        .extensions
        .get::<OxideOptions>()
        .and_then(|options| options.device_limit)
}

/// The limit device state on `backend` claims under: the session's, or where it sets
/// none [`default_device_limit`]; `None`: nothing to claim (the CPU backend without a
/// session limit).
pub fn device_limit_for(session: Option<usize>, backend: &dyn GpuBackend) -> Option<usize> {
    session.or_else(|| default_device_limit(backend))
}

/// The fewest slots a device group table ends with when it has to grow (the CUDA
/// backend starts with 4,096 and, past them, sizes one for every row being its own group,
/// at least twice that): the estimate of an aggregate's state takes the larger table.
pub(crate) const GROUP_TABLE_SLOTS: usize = 1 << 13;

/// An estimate of the device bytes of a hash table of `rows` rows with `words` 8-byte
/// words per slot besides its 8 bytes of slot state: twice the rows' slots rounded up to
/// a power of two, at least `min_slots`, as the device's group and join tables size
/// themselves, plus a 4-byte row index per row.
pub(crate) fn table_bytes(rows: usize, words: usize, min_slots: usize) -> usize {
    let slots = rows
        .saturating_mul(2)
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX)
        .max(min_slots);
    slots
        .saturating_mul(8 + 8 * words)
        .saturating_add(rows.saturating_mul(4))
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
    fn operators_read_the_device_limit_the_session_options_set_in_the_task_configuration() {
        assert_eq!(
            session_device_limit(&SessionConfig::new()),
            None,
            "a configuration without the options has no limit"
        );
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        assert_eq!(session_device_limit(&config), None);
        config
            .options_mut()
            .set(crate::option_keys::DEVICE_LIMIT, "'64K'")
            .unwrap();
        assert_eq!(session_device_limit(&config), Some(64 << 10));
        config
            .options_mut()
            .set(crate::option_keys::DEVICE_LIMIT, "none")
            .unwrap();
        assert_eq!(session_device_limit(&config), None);
        let cpu = oxidelake_device::CpuBackend::new();
        assert_eq!(device_limit_for(Some(65_536), &cpu), Some(65_536));
        assert_eq!(device_limit_for(None, &cpu), None);
    }

    #[test]
    fn a_table_estimate_rounds_twice_the_rows_up_to_a_power_of_two_slots() {
        // 1,000 rows: 2,048 slots of 8 + 2 × 8 bytes, and 4 bytes a row.
        assert_eq!(table_bytes(1000, 2, 0), 2048 * 24 + 4000);
        assert_eq!(table_bytes(10, 0, 4096), 4096 * 8 + 40);
        assert_eq!(table_bytes(usize::MAX / 2, 1, 0), usize::MAX);
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
