//! Garbage collection: objects no committed table version references.
//!
//! An INSERT uploads its objects before it commits; if the commit never lands (a crash,
//! a conflict beyond the retries), those objects are orphans. Collection is two steps so
//! that the caller's view of the tables cannot be older than the collector's view of the
//! store:
//!
//! 1. [`ManagedObjectStore::begin_gc`] notes the start time `S` and the pins present;
//! 2. the caller reads every table's latest version into the `referenced` set;
//! 3. [`GcRun::collect`] takes the store lock exclusively and deletes an object only if
//!    it is not referenced, not pinned (at step 1 or now) and was last published or
//!    deduplicated at least `retention` before `S`.
//!
//! Why that is enough: a row committed before step 2 is in `referenced`. A row committed
//! after it belongs to an INSERT that either uploaded after `S` (the upload published or
//! refreshed the object's time, so it is younger than `S`) or uploaded before `S` and
//! still held its pin at step 1 (pins are dropped only after the commit). Uploads decide
//! "already stored" under the shared lock, so that decision and a deletion never
//! interleave. The retention window additionally protects objects written by callers
//! that do not pin (`put_file`), and it has a floor, [`MIN_RETENTION`], that only an
//! explicit [`GcPolicy::allow_below_floor`] lifts.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::lock::{StoreLock, is_locked_elsewhere};
use crate::pin::{dir_names, live_pins, pinned_names, remove_if_present as remove};
use crate::{ManagedObjectStore, ObjectError, Sha256Digest};

/// The shortest retention a collection accepts without an explicit override.
pub const MIN_RETENTION: Duration = Duration::from_secs(3600);

/// The longest retention accepted (a century), so arithmetic on times cannot overflow.
pub const MAX_RETENTION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How a collection treats young objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    retention: Duration,
    allow_below_floor: bool,
}

impl GcPolicy {
    /// Keep unreferenced objects younger than `retention`.
    pub fn new(retention: Duration) -> Self {
        Self {
            retention,
            allow_below_floor: false,
        }
    }

    /// Accept a retention below [`MIN_RETENTION`] (objects of uploads by callers that do
    /// not pin may be deleted before their commit lands).
    pub fn allow_below_floor(mut self) -> Self {
        self.allow_below_floor = true;
        self
    }

    /// The retention window.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    fn check(&self) -> Result<(), ObjectError> {
        if self.retention > MAX_RETENTION {
            return Err(ObjectError::InvalidRetention(format!(
                "{:?} is longer than the maximum of {} years",
                self.retention,
                MAX_RETENTION.as_secs() / (365 * 24 * 3600)
            )));
        }
        if self.retention < MIN_RETENTION && !self.allow_below_floor {
            return Err(ObjectError::RetentionBelowFloor {
                requested: self.retention,
                floor: MIN_RETENTION,
            });
        }
        Ok(())
    }
}

/// Parses a retention given in hours (`24`, `0.5`): finite, not negative, at most
/// [`MAX_RETENTION`]. The floor is checked when the collection starts.
pub fn parse_retention_hours(text: &str) -> Result<Duration, ObjectError> {
    let invalid = |why: &str| ObjectError::InvalidRetention(format!("{text:?}: {why}"));
    let hours: f64 = text.trim().parse().map_err(|_| invalid("not a number"))?;
    if !hours.is_finite() {
        return Err(invalid("not a finite number of hours"));
    }
    if hours < 0.0 {
        return Err(invalid("negative"));
    }
    let max_hours = MAX_RETENTION.as_secs_f64() / 3600.0;
    if hours > max_hours {
        return Err(invalid("longer than a century"));
    }
    Duration::try_from_secs_f64(hours * 3600.0).map_err(|_| invalid("out of range"))
}

/// What a collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Objects looked at.
    pub scanned: u64,
    /// Objects kept because a committed version references them.
    pub referenced: u64,
    /// Unreferenced objects kept because an in-flight INSERT pinned them.
    pub pinned: u64,
    /// Unreferenced objects kept because they are younger than the retention window.
    pub too_young: u64,
    /// Objects deleted.
    pub deleted: u64,
    /// Bytes freed (objects and abandoned uploads).
    pub freed_bytes: u64,
    /// Abandoned temporary uploads deleted.
    pub deleted_uploads: u64,
    /// Pins of processes that died, removed.
    pub stale_pins: u64,
}

/// A collection between its start and its delete phase.
#[derive(Debug)]
pub struct GcRun {
    store: ManagedObjectStore,
    policy: GcPolicy,
    started: SystemTime,
    pinned_at_start: HashSet<Sha256Digest>,
}

impl ManagedObjectStore {
    /// Starts a collection under `policy` (refused below the retention floor unless the
    /// policy allows it). Read the tables' references *after* this call.
    pub fn begin_gc(&self, policy: GcPolicy) -> Result<GcRun, ObjectError> {
        policy.check()?;
        let started = SystemTime::now();
        let pinned_at_start = pinned_names(&self.pins_dir())?;
        Ok(GcRun {
            store: self.clone(),
            policy,
            started,
            pinned_at_start,
        })
    }
}

/// Size and modification time of `path`, `None` when it is gone.
fn stat(path: &Path) -> Result<Option<(u64, SystemTime)>, ObjectError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(Some((
            meta.len(),
            meta.modified().unwrap_or_else(|_| SystemTime::now()),
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ObjectError::Io {
            uri: path.display().to_string(),
            source,
        }),
    }
}

impl GcRun {
    /// Whether something last written at `modified` is past the window (measured from
    /// the collection's start, not from now).
    fn expired(&self, modified: SystemTime) -> bool {
        self.started
            .duration_since(modified)
            .is_ok_and(|age| age >= self.policy.retention)
    }

    /// Deletes every object not in `referenced` (the digests of every committed table
    /// version, read after [`ManagedObjectStore::begin_gc`]) that no pin protects and
    /// that is past the retention window, and abandoned uploads past it.
    pub fn collect(self, referenced: &HashSet<Sha256Digest>) -> Result<GcReport, ObjectError> {
        let store = &self.store;
        let _lock = StoreLock::exclusive(&store.lock_path())?;
        let mut report = GcReport::default();
        let (live, stale) = live_pins(&store.pins_dir())?;
        report.stale_pins = stale;
        let objects = store.root().join("sha256");
        for head in dir_names(&objects)? {
            let prefix = objects.join(&head);
            if !prefix.is_dir() {
                continue;
            }
            for tail in dir_names(&prefix)? {
                let Ok(digest) = format!("{head}{tail}").parse::<Sha256Digest>() else {
                    continue; // not an object this store wrote
                };
                let path = prefix.join(&tail);
                report.scanned += 1;
                if referenced.contains(&digest) {
                    report.referenced += 1;
                    continue;
                }
                if live.contains(&digest) || self.pinned_at_start.contains(&digest) {
                    report.pinned += 1;
                    continue;
                }
                let Some((bytes, modified)) = stat(&path)? else {
                    continue; // removed meanwhile
                };
                if !self.expired(modified) {
                    report.too_young += 1;
                    continue;
                }
                if remove(&path)? {
                    report.deleted += 1;
                    report.freed_bytes += bytes;
                }
            }
        }
        let tmp = store.tmp_dir();
        for name in dir_names(&tmp)? {
            let path = tmp.join(name);
            // An upload still being written holds its file locked.
            if is_locked_elsewhere(&path)? != Some(false) {
                continue;
            }
            let Some((bytes, modified)) = stat(&path)? else {
                continue;
            };
            if self.expired(modified) && remove(&path)? {
                report.deleted_uploads += 1;
                report.freed_bytes += bytes;
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_text_that_is_not_a_finite_non_negative_number_is_refused() {
        for bad in [
            "inf", "-inf", "1e300", "NaN", "-1", "-0.5", "", "soon", "1e17",
        ] {
            assert!(
                matches!(
                    parse_retention_hours(bad),
                    Err(ObjectError::InvalidRetention(_))
                ),
                "{bad:?} was accepted"
            );
        }
        assert_eq!(
            parse_retention_hours("24").unwrap(),
            Duration::from_secs(86_400)
        );
        assert_eq!(parse_retention_hours("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn a_retention_below_the_floor_is_refused_unless_explicitly_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let store = ManagedObjectStore::open(dir.path()).unwrap();
        for short in [Duration::ZERO, MIN_RETENTION - Duration::from_secs(1)] {
            assert!(matches!(
                store.begin_gc(GcPolicy::new(short)),
                Err(ObjectError::RetentionBelowFloor { .. })
            ));
            assert!(
                store
                    .begin_gc(GcPolicy::new(short).allow_below_floor())
                    .is_ok()
            );
        }
        assert!(store.begin_gc(GcPolicy::new(MIN_RETENTION)).is_ok());
    }
}
