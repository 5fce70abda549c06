//! Garbage collection: objects no retained table version references.
//!
//! An INSERT uploads its objects before it commits; if the commit never lands (a crash,
//! a conflict beyond the retries), those objects are orphans. `gc` deletes objects that
//! are not in the caller's `referenced` set and are older than `retention`, plus
//! abandoned temporary uploads older than `retention`. The retention window protects
//! uploads whose commit is still in flight: an object younger than it is never deleted,
//! referenced or not. The caller computes `referenced` from every table version it
//! retains; anything a retained snapshot points at is therefore never deleted.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::{ManagedObjectStore, ObjectError, Sha256Digest};

/// What a collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Objects looked at.
    pub scanned: u64,
    /// Objects kept because a retained version references them.
    pub referenced: u64,
    /// Unreferenced objects kept because they are younger than the retention window.
    pub too_young: u64,
    /// Objects deleted.
    pub deleted: u64,
    /// Bytes freed (objects and abandoned uploads).
    pub freed_bytes: u64,
    /// Abandoned temporary uploads deleted.
    pub deleted_uploads: u64,
}

fn older_than(
    path: &Path,
    retention: Duration,
    now: SystemTime,
) -> Result<(bool, u64), ObjectError> {
    let meta = fs::metadata(path).map_err(|source| ObjectError::Io {
        uri: path.display().to_string(),
        source,
    })?;
    let modified = meta.modified().unwrap_or(now);
    let age = now.duration_since(modified).unwrap_or_default();
    Ok((age >= retention, meta.len()))
}

fn remove(path: &Path) -> Result<(), ObjectError> {
    fs::remove_file(path).map_err(|source| ObjectError::Io {
        uri: path.display().to_string(),
        source,
    })
}

impl ManagedObjectStore {
    /// Deletes unreferenced objects and abandoned uploads older than `retention`.
    pub fn gc(
        &self,
        referenced: &HashSet<Sha256Digest>,
        retention: Duration,
    ) -> Result<GcReport, ObjectError> {
        let now = SystemTime::now();
        let mut report = GcReport::default();
        let io = |dir: &Path| {
            let uri = dir.display().to_string();
            move |source| ObjectError::Io { uri, source }
        };
        let objects = self.root().join("sha256");
        for prefix in fs::read_dir(&objects).map_err(io(&objects))? {
            let prefix = prefix.map_err(io(&objects))?.path();
            let Some(head) = prefix
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            if !prefix.is_dir() {
                continue;
            }
            for entry in fs::read_dir(&prefix).map_err(io(&prefix))? {
                let path = entry.map_err(io(&prefix))?.path();
                let Some(tail) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                let Ok(digest) = format!("{head}{tail}").parse::<Sha256Digest>() else {
                    continue; // not an object this store wrote
                };
                report.scanned += 1;
                if referenced.contains(&digest) {
                    report.referenced += 1;
                    continue;
                }
                let (old, bytes) = older_than(&path, retention, now)?;
                if !old {
                    report.too_young += 1;
                    continue;
                }
                remove(&path)?;
                report.deleted += 1;
                report.freed_bytes += bytes;
            }
        }
        let tmp = self.tmp_dir();
        for entry in fs::read_dir(&tmp).map_err(io(&tmp))? {
            let path = entry.map_err(io(&tmp))?.path();
            let (old, bytes) = older_than(&path, retention, now)?;
            if old {
                remove(&path)?;
                report.deleted_uploads += 1;
                report.freed_bytes += bytes;
            }
        }
        Ok(report)
    }
}
