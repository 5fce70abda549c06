//! The demo's dataset on disk, published atomically.
//!
//! A run writes the table into a sibling temporary directory with a unique name, fsyncs
//! the Parquet file, a `COMPLETE` marker holding that file's length, and the directories,
//! then renames the temporary directory into place and fsyncs the parent. So a dataset
//! directory that exists is complete; an interrupted run leaves only its temporary
//! directory behind.
//!
//! ```text
//!  parent/.oxide-demo-data.partial-XXXXXX/   .lock (held while writing), t/part-0.parquet,
//!        │                                    COMPLETE
//!        │ fsync file, marker, directories; unlink .lock
//!        ▼ rename, fsync parent
//!  parent/oxide-demo-data/                   complete, or absent
//! ```
//!
//! Leftovers: a run holds an exclusive lock on the `.lock` file of its temporary
//! directory while it writes. Before writing, a run removes each sibling temporary
//! directory whose lock it can take (its run died, and the OS released the lock), and
//! leaves alone those still locked (a run in progress) or without a lock file (one being
//! created or published this instant). What it cannot remove it ignores.
//!
//! A dataset directory without the marker, or whose Parquet file's length differs from
//! the marker's — left by an interrupted run of an older `oxide`, or damaged since — is a
//! one-line error saying to delete it: the demo never deletes a non-empty dataset
//! directory, as it may hold someone's data.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::Path;

use oxidelake_core::EngineError;
use oxidelake_storage::{LakeWriterOptions, WrittenFile};

use crate::cli::gen_data::generate_synthetic;

/// The demo's table: a subdirectory of the dataset.
pub(super) const TABLE: &str = "t";
/// The Parquet file `generate_synthetic` writes in the table's directory.
const DATA_FILE: &str = "part-0.parquet";
/// Written last: the data file's length in bytes, as text.
const MARKER: &str = "COMPLETE";
/// Held (locked) by the run writing a temporary directory.
const LOCK: &str = ".lock";

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |e| EngineError::io(path.display().to_string(), e)
}

fn incomplete(dir: &Path, why: impl std::fmt::Display) -> EngineError {
    EngineError::Format {
        path: dir.display().to_string(),
        detail: format!(
            "not a complete demo dataset ({why}); delete the directory and run `oxide demo` \
             again"
        ),
        source: None,
    }
}

/// Whether `dir` holds a complete dataset (`Ok(true)`) or nothing yet (`Ok(false)`: it
/// is missing, or an empty directory). Anything else is an error that says to delete it.
pub(super) fn is_complete(dir: &Path) -> Result<bool, EngineError> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(dir)(e)),
        Ok(mut entries) => {
            if entries.next().is_none() {
                return Ok(false);
            }
        }
    }
    let marker = dir.join(MARKER);
    let recorded = match std::fs::read_to_string(&marker) {
        Ok(text) => text.trim().parse::<u64>().ok(),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(incomplete(
                dir,
                format!("no {MARKER} marker: left by an interrupted or older `oxide demo`"),
            ));
        }
        Err(e) => return Err(io_error(&marker)(e)),
    };
    let data = dir.join(TABLE).join(DATA_FILE);
    let actual = std::fs::metadata(&data).ok().map(|m| m.len());
    match (recorded, actual) {
        (Some(recorded), Some(actual)) if recorded == actual => Ok(true),
        _ => Err(incomplete(
            dir,
            format!("{TABLE}/{DATA_FILE} does not have the length {MARKER} records"),
        )),
    }
}

/// Writes `rows` synthetic rows into a temporary sibling of `dir` and renames it to
/// `dir` (see the module docs). The result's path is the data file inside `dir`.
pub(super) fn generate(dir: &Path, rows: u64) -> Result<WrittenFile, EngineError> {
    let name = dir
        .file_name()
        .ok_or_else(|| EngineError::InvalidArgument {
            what: "demo directory",
            detail: format!("{} does not end in a directory name", dir.display()),
        })?;
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_error(parent))?;
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".partial-");
    remove_abandoned(parent, &prefix);

    let tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .tempdir_in(parent)
        .map_err(io_error(parent))?;
    let lock_path = tmp.path().join(LOCK);
    let lock = File::create(&lock_path).map_err(io_error(&lock_path))?;
    lock.lock().map_err(io_error(&lock_path))?;

    let mut written = generate_synthetic(tmp.path(), rows, &LakeWriterOptions::default())?;
    sync_file(&written.path)?;
    sync_dir(&tmp.path().join(TABLE))?;
    let marker = tmp.path().join(MARKER);
    File::create(&marker)
        .and_then(|mut f| {
            f.write_all(format!("{}\n", written.bytes).as_bytes())?;
            f.sync_all()
        })
        .map_err(io_error(&marker))?;
    unlock_and_remove(lock, &lock_path)?;
    sync_dir(tmp.path())?;

    // An empty directory in the way (made by hand) is replaced; anything else is not.
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none()) {
        std::fs::remove_dir(dir).map_err(io_error(dir))?;
    }
    if let Err(e) = std::fs::rename(tmp.path(), dir) {
        // A concurrent run may have published first: then use its dataset (ours is
        // removed when `tmp` drops).
        if is_complete(dir).unwrap_or(false) {
            written.path = dir.join(TABLE).join(DATA_FILE);
            return Ok(written);
        }
        return Err(io_error(dir)(e));
    }
    // Renamed: nothing is left at the temporary path for `tmp` to remove.
    let _ = tmp.keep();
    sync_dir(parent)?;
    written.path = dir.join(TABLE).join(DATA_FILE);
    Ok(written)
}

/// Removes the lock file, while still holding its lock where the platform allows (Unix),
/// so no other run ever finds this directory with a lock file it can take.
fn unlock_and_remove(lock: File, path: &Path) -> Result<(), EngineError> {
    if std::fs::remove_file(path).is_err() {
        drop(lock);
        std::fs::remove_file(path).map_err(io_error(path))?;
    }
    Ok(())
}

/// Removes the temporary directories (names starting with `prefix`) of runs that died;
/// best effort (see the module docs).
fn remove_abandoned(parent: &Path, prefix: &OsStr) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let named = entry
            .file_name()
            .as_encoded_bytes()
            .starts_with(prefix.as_encoded_bytes());
        if !named || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        // No lock file: a run is creating or publishing this directory right now.
        let Ok(lock) = File::open(path.join(LOCK)) else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => tracing::info!(
                path = %path.display(),
                "removed the partial dataset of an interrupted `oxide demo`"
            ),
            Err(e) => tracing::warn!(
                path = %path.display(),
                error = %e,
                "cannot remove the partial dataset of an interrupted `oxide demo`; ignoring it"
            ),
        }
    }
}

fn sync_file(path: &Path) -> Result<(), EngineError> {
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.sync_all())
        .map_err(io_error(path))
}

/// Makes the entries of `dir` durable (only Unix can open a directory to fsync it).
fn sync_dir(dir: &Path) -> Result<(), EngineError> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_error(dir))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
