//! The store lock: `objects/.lock`, an advisory `flock(2)` on one file.
//!
//! Two critical sections must never interleave: an upload deciding that an object is
//! already there (and refreshing or repairing it), and garbage collection deciding that
//! the same object may go and deleting it. Uploads take the lock shared for their short
//! publish step (the long copy-and-hash runs outside it), garbage collection takes it
//! exclusive for its delete phase. `flock` locks belong to the open file description, so
//! they also order threads of one process, and the kernel drops them when a process
//! dies: a killed writer or collector never leaves the store locked.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::ObjectError;
use crate::error::io;
use crate::regular_file::open_regular;

/// A held store lock (shared or exclusive); released on drop.
#[derive(Debug)]
pub(crate) struct StoreLock {
    file: File,
}

impl StoreLock {
    fn open(path: &Path) -> Result<File, ObjectError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io(path.display().to_string()))
    }

    /// Waits for and takes the lock shared (uploads publishing).
    pub(crate) fn shared(path: &Path) -> Result<Self, ObjectError> {
        let file = Self::open(path)?;
        file.lock_shared().map_err(io(path.display().to_string()))?;
        Ok(Self { file })
    }

    /// Waits for and takes the lock exclusive (garbage collection deleting).
    pub(crate) fn exclusive(path: &Path) -> Result<Self, ObjectError> {
        let file = Self::open(path)?;
        file.lock().map_err(io(path.display().to_string()))?;
        Ok(Self { file })
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // Closing the file releases the lock as well; unlocking first makes the release
        // independent of other handles to the same description.
        let _ = self.file.unlock();
    }
}

/// Whether another open file description holds a lock on `path`: `Some(true)` held,
/// `Some(false)` free, `None` when the file is gone. Something there that is not a
/// regular file (a FIFO would block the open) is an error naming it.
pub(crate) fn is_locked_elsewhere(path: &Path) -> Result<Option<bool>, ObjectError> {
    let (file, _) = match open_regular(path, &path.display().to_string()) {
        Ok(opened) => opened,
        Err(ObjectError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(Some(false))
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(Some(true)),
        Err(std::fs::TryLockError::Error(source)) => Err(io(path.display().to_string())(source)),
    }
}
