//! Unique file names for uploads in progress and pins.
//!
//! A name made of the process id and a per-process counter is not unique across runs:
//! in a container every run may get the same pid, and a file left by a killed run would
//! then collide with the next run's first upload forever. Names here add the clock's
//! nanoseconds and a per-process random salt, and creation uses `create_new` with a
//! bounded number of retries on the (now unlikely) collision.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ObjectError;

/// Attempts at a fresh name before giving up.
const CREATE_ATTEMPTS: u32 = 16;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A random value fixed for the life of the process (std's hash seed is random).
fn salt() -> u64 {
    static SALT: OnceLock<u64> = OnceLock::new();
    *SALT.get_or_init(|| RandomState::new().hash_one(std::process::id()))
}

fn candidate(prefix: &str, extension: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    format!(
        "{prefix}.{}-{:x}-{}-{nanos:x}.{extension}",
        std::process::id(),
        salt(),
        SEQ.fetch_add(1, Ordering::Relaxed),
    )
}

/// Creates a new file `<prefix>.<unique>.<extension>` in `dir`, opened for writing.
pub(crate) fn create_unique(
    dir: &Path,
    prefix: &str,
    extension: &str,
) -> Result<(PathBuf, File), ObjectError> {
    let mut last = None;
    for _ in 0..CREATE_ATTEMPTS {
        let path = dir.join(candidate(prefix, extension));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some((path, e)),
            Err(source) => {
                return Err(ObjectError::Io {
                    uri: path.display().to_string(),
                    source,
                });
            }
        }
    }
    let (path, source) = last.unwrap_or_else(|| {
        (
            dir.to_path_buf(),
            std::io::Error::other("no attempt was made"),
        )
    });
    Err(ObjectError::Io {
        uri: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_between_calls_even_with_the_same_pid_and_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = create_unique(dir.path(), "upload", "part").unwrap();
        let (b, _) = create_unique(dir.path(), "upload", "part").unwrap();
        assert_ne!(a, b);
        // A leftover file named as a previous run with this pid and counter would have
        // named it does not block the next creation.
        let stale = dir
            .path()
            .join(format!("upload.{}-0.part", std::process::id()));
        std::fs::write(&stale, b"left by a killed run").unwrap();
        assert!(create_unique(dir.path(), "upload", "part").is_ok());
    }
}
