//! The `std::fs` side of the store: opening, `fstat`, staging files and moving them into
//! place, each mirroring what `LocalFileSystem` does so both stores agree on a directory.
//! The async callers run these on tokio's blocking pool through [`blocking`].

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use object_store::{ObjectMeta, PutResult};

use super::error::{UringError, open_error};

/// Times a staged upload retries after creating its missing parent directories (a
/// concurrent delete may remove them again).
const PARENT_DIR_ATTEMPTS: u32 = 3;

/// Runs `work` on tokio's blocking pool, or inline outside a tokio runtime (as
/// `LocalFileSystem` does).
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, object_store::Error>
where
    F: FnOnce() -> Result<T, UringError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime
            .spawn_blocking(work)
            .await
            .map_err(|source| object_store::Error::JoinError { source })?
            .map_err(Into::into),
        Err(_) => work().map_err(Into::into),
    }
}

/// Opens `path` for reading with its [`ObjectMeta`]; a directory is NotFound.
pub(crate) fn open_object(
    path: &Path,
    location: object_store::path::Path,
) -> Result<(File, ObjectMeta), UringError> {
    let file = open_file(path)?;
    let metadata = file
        .metadata()
        .map_err(|source| open_error(path.to_path_buf(), source))?;
    if metadata.is_dir() {
        return Err(UringError::NotFound {
            path: path.to_path_buf(),
            source: io::Error::new(ErrorKind::NotFound, "is directory"),
        });
    }
    let meta = object_meta(&metadata, location, path)?;
    Ok((file, meta))
}

/// Opens `path` for reading; ENOENT is NotFound.
pub(crate) fn open_file(path: &Path) -> Result<File, UringError> {
    File::open(path).map_err(|source| open_error(path.to_path_buf(), source))
}

/// `ObjectMeta` as `LocalFileSystem` builds it from the same `stat`.
pub(crate) fn object_meta(
    metadata: &Metadata,
    location: object_store::path::Path,
    path: &Path,
) -> Result<ObjectMeta, UringError> {
    let modified = metadata.modified().map_err(|source| UringError::Metadata {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(ObjectMeta {
        location,
        last_modified: modified.into(),
        size: metadata.len(),
        e_tag: Some(e_tag(metadata)),
        version: None,
    })
}

/// `LocalFileSystem`'s e-tag, `{inode:x}-{mtime_micros:x}-{size:x}` (the Apache httpd
/// scheme), so both stores hand out the same e-tag for the same file.
pub(crate) fn e_tag(metadata: &Metadata) -> String {
    let inode = metadata.ino();
    let size = metadata.len();
    let mtime_micros = metadata
        .modified()
        .ok()
        .and_then(|mtime| mtime.duration_since(SystemTime::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("{inode:x}-{mtime_micros:x}-{size:x}")
}

/// Creates the staging file `{dest}#{n}` for the first free `n`, creating parent
/// directories, exactly as `LocalFileSystem` stages uploads (its listings skip such names).
pub(crate) fn create_staging_file(dest: &Path) -> Result<(File, PathBuf), UringError> {
    let mut suffix: u64 = 1;
    let mut parent_attempts = 0;
    loop {
        let staging = staging_path(dest, suffix);
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&staging);
        match opened {
            Ok(file) => return Ok((file, staging)),
            Err(source) => match source.kind() {
                ErrorKind::AlreadyExists => suffix += 1,
                ErrorKind::NotFound if parent_attempts < PARENT_DIR_ATTEMPTS => {
                    parent_attempts += 1;
                    create_parent_dirs(&staging, source)?;
                }
                _ => return Err(open_error(staging, source)),
            },
        }
    }
}

fn staging_path(dest: &Path, suffix: u64) -> PathBuf {
    let mut staging = OsString::from(dest.as_os_str());
    staging.push(format!("#{suffix}"));
    PathBuf::from(staging)
}

fn create_parent_dirs(path: &Path, source: io::Error) -> Result<(), UringError> {
    let Some(parent) = path.parent() else {
        return Err(UringError::Open {
            path: path.to_path_buf(),
            source,
        });
    };
    std::fs::create_dir_all(parent).map_err(|source| UringError::Open {
        path: parent.to_path_buf(),
        source,
    })
}

/// Moves a fully written staging file to `dest` atomically: `rename` to overwrite, or
/// `hard_link` (which fails on an existing target) when `create_only`. Reports the
/// e-tag of what was written; removes the staging file on failure.
pub(crate) fn commit_staged(
    file: Arc<File>,
    staging: &Path,
    dest: &Path,
    create_only: bool,
) -> Result<PutResult, UringError> {
    let committed = stat_and_move(file, staging, dest, create_only);
    if committed.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = std::fs::remove_file(staging);
    }
    committed
}

fn stat_and_move(
    file: Arc<File>,
    staging: &Path,
    dest: &Path,
    create_only: bool,
) -> Result<PutResult, UringError> {
    let metadata = file.metadata().map_err(|source| UringError::Metadata {
        path: staging.to_path_buf(),
        source,
    })?;
    let e_tag = e_tag(&metadata);
    // Closed before the move, as LocalFileSystem does (some FUSE file systems upload on close).
    drop(file);
    if create_only {
        std::fs::hard_link(staging, dest).map_err(|source| match source.kind() {
            ErrorKind::AlreadyExists => UringError::AlreadyExists {
                path: dest.to_path_buf(),
                source,
            },
            _ => rename_error(staging, dest, source),
        })?;
        // The object is in place; a leftover staging name is ignored by listings.
        let _ = std::fs::remove_file(staging);
    } else {
        std::fs::rename(staging, dest).map_err(|source| rename_error(staging, dest, source))?;
    }
    Ok(PutResult {
        e_tag: Some(e_tag),
        version: None,
    })
}

fn rename_error(from: &Path, to: &Path, source: io::Error) -> UringError {
    UringError::Rename {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        source,
    }
}

/// Removes a staging file when dropped, unless disarmed: a put that fails or is
/// cancelled between creating and committing it leaves nothing behind.
#[derive(Debug)]
pub(crate) struct StagingGuard {
    path: Option<PathBuf>,
}

impl StagingGuard {
    /// Guards `path`.
    pub(crate) fn new(path: PathBuf) -> Self {
        StagingGuard { path: Some(path) }
    }

    /// Stops guarding (the commit now owns the file's fate) and returns the path.
    pub(crate) fn disarm(mut self) -> PathBuf {
        self.path.take().unwrap_or_default()
    }
}

impl Drop for StagingGuard {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            // One unlink; best effort, a leftover staging name is ignored by listings.
            let _ = std::fs::remove_file(path);
        }
    }
}
