//! Pins: an in-flight INSERT's claim on the objects it uploaded, until its commit ends.
//!
//! Between an upload and the commit of the row that references it, an object is
//! referenced by no table version, so garbage collection would see an orphan. The
//! retention window alone does not protect it: an upload of bytes that already exist as
//! an old orphan publishes nothing new, and an INSERT may take longer than any window.
//! A pin closes that gap. It is a file `objects/.pins/<sha256>.<unique>.pin` that its
//! owner holds open with an exclusive `flock(2)`:
//!
//! - taken under the shared store lock, *before* the upload decides whether the object
//!   exists, so a collector (exclusive lock) sees either no object yet or the pin;
//! - dropped (file removed) once the commit landed or failed;
//! - a pin file nobody holds locked belongs to a process that died: the kernel released
//!   its lock, so garbage collection removes it without waiting for any timeout.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::lock::is_locked_elsewhere;
use crate::{ObjectError, Sha256Digest};

/// A held pin on one object; removing it is dropping it.
#[derive(Debug)]
pub struct ObjectPin {
    path: PathBuf,
    digest: Sha256Digest,
    // Held open for its lock; closed after the file is removed.
    file: Option<File>,
}

impl ObjectPin {
    /// Creates and locks a new pin on `digest` in `pins_dir`.
    pub(crate) fn take(pins_dir: &Path, digest: Sha256Digest) -> Result<Self, ObjectError> {
        let (path, file) = crate::unique::create_unique(pins_dir, &digest.to_string(), "pin")?;
        file.lock().map_err(|source| ObjectError::Io {
            uri: path.display().to_string(),
            source,
        })?;
        Ok(Self {
            path,
            digest,
            file: Some(file),
        })
    }

    /// The pinned object.
    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }
}

impl Drop for ObjectPin {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            // A pin left behind only delays collection of its object: the next
            // collection finds it unlocked and removes it.
            tracing::warn!(pin = %self.path.display(), error = %e, "could not remove a pin");
        }
        drop(self.file.take());
    }
}

/// The digest a pin file's name claims, if it is a pin file.
fn pinned_digest(name: &str) -> Option<Sha256Digest> {
    let stem = name.strip_suffix(".pin")?;
    let (hex, _) = stem.split_once('.')?;
    hex.parse().ok()
}

/// Every digest some pin file in `pins_dir` names, live or not (a cheap, conservative
/// sample: a collector unions it with the live pins it finds later).
pub(crate) fn pinned_names(pins_dir: &Path) -> Result<HashSet<Sha256Digest>, ObjectError> {
    let mut out = HashSet::new();
    for name in dir_names(pins_dir)? {
        if let Some(digest) = pinned_digest(&name) {
            out.insert(digest);
        }
    }
    Ok(out)
}

/// The digests of the live pins in `pins_dir`; pins whose owner died are removed.
/// Call with the store lock held exclusively, so no pin is being created meanwhile.
pub(crate) fn live_pins(pins_dir: &Path) -> Result<(HashSet<Sha256Digest>, u64), ObjectError> {
    let mut live = HashSet::new();
    let mut stale = 0u64;
    for name in dir_names(pins_dir)? {
        let path = pins_dir.join(&name);
        let Some(digest) = pinned_digest(&name) else {
            // Not a pin (or a half-created one, whose creator died before naming it):
            // reclaim it when no one holds it.
            if is_locked_elsewhere(&path)? == Some(false) {
                remove_if_present(&path)?;
                stale += 1;
            }
            continue;
        };
        match is_locked_elsewhere(&path)? {
            Some(true) => {
                live.insert(digest);
            }
            Some(false) => {
                remove_if_present(&path)?;
                stale += 1;
            }
            None => {}
        }
    }
    Ok((live, stale))
}

/// Removes `path`; `false` when something else removed it first.
pub(crate) fn remove_if_present(path: &Path) -> Result<bool, ObjectError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(ObjectError::Io {
            uri: path.display().to_string(),
            source,
        }),
    }
}

/// File names in `dir` (UTF-8 ones; the store writes no others).
pub(crate) fn dir_names(dir: &Path) -> Result<Vec<String>, ObjectError> {
    let io = |source| ObjectError::Io {
        uri: dir.display().to_string(),
        source,
    };
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_pin_is_live_and_a_dropped_or_abandoned_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let digest = Sha256Digest::of(b"pinned");
        let pin = ObjectPin::take(dir.path(), digest).unwrap();
        let (live, stale) = live_pins(dir.path()).unwrap();
        assert!(live.contains(&digest));
        assert_eq!(stale, 0);
        drop(pin);
        assert!(dir_names(dir.path()).unwrap().is_empty());

        // A pin file whose owner died: nobody holds its lock.
        let abandoned = dir.path().join(format!("{digest}.123-0-0.pin"));
        std::fs::write(&abandoned, b"").unwrap();
        assert!(pinned_names(dir.path()).unwrap().contains(&digest));
        let (live, stale) = live_pins(dir.path()).unwrap();
        assert!(live.is_empty());
        assert_eq!(stale, 1);
        assert!(!abandoned.exists());
    }
}
