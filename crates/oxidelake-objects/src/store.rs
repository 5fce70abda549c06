//! The local managed-object store under `<data-dir>/objects`.
//!
//! Layout: `objects/sha256/<first two hex digits>/<remaining 62>` holds each object,
//! named by its content, read-only once published; `objects/.tmp/` holds uploads in
//! progress. An upload copies its source in bounded chunks (1 MiB by default) while
//! hashing, fsyncs the temporary file, and only then renames it to its content address
//! (and fsyncs the directory), so a crash or a failed read never leaves a partial object
//! where readers look. Uploading the same bytes twice stores them once.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::mime::sniff_mime;
use crate::{DataLocation, ObjectError, Sha256Digest};

/// Bytes copied per read by default: bounded memory whatever the object's size.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

static UPLOAD_SEQ: AtomicU64 = AtomicU64::new(0);

fn io(uri: impl Into<String>) -> impl FnOnce(std::io::Error) -> ObjectError {
    let uri = uri.into();
    move |source| ObjectError::Io { uri, source }
}

/// A managed object store on the local file system.
#[derive(Debug, Clone)]
pub struct ManagedObjectStore {
    root: PathBuf,
    chunk_bytes: usize,
}

/// Removes an unfinished upload's temporary file unless it was published.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl ManagedObjectStore {
    /// The store of `data_dir` (its `objects` directory is created if missing).
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, ObjectError> {
        let root = data_dir.as_ref().join("objects");
        for dir in [root.join("sha256"), root.join(".tmp")] {
            fs::create_dir_all(&dir).map_err(io(dir.display().to_string()))?;
        }
        let root = root
            .canonicalize()
            .map_err(io(root.display().to_string()))?;
        Ok(Self {
            root,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
        })
    }

    /// Copies in chunks of `bytes` (at least 4 KiB).
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(4096);
        self
    }

    /// The store's directory (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the object with `digest` lives.
    pub fn path_of(&self, digest: &Sha256Digest) -> PathBuf {
        let hex = digest.to_string();
        self.root.join("sha256").join(&hex[..2]).join(&hex[2..])
    }

    /// Directory of uploads in progress.
    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.root.join(".tmp")
    }

    /// Streams the local file `source` into the store. `mime` overrides the type sniffed
    /// from the content and extension.
    pub fn put_file(&self, source: &Path, mime: Option<&str>) -> Result<DataLocation, ObjectError> {
        let name = source.display().to_string();
        let file = File::open(source).map_err(io(&name))?;
        self.put_reader(file, source, mime)
    }

    /// Streams `reader` into the store; `name` is used for MIME sniffing and messages.
    pub fn put_reader(
        &self,
        mut reader: impl Read,
        name: &Path,
        mime: Option<&str>,
    ) -> Result<DataLocation, ObjectError> {
        let source = name.display().to_string();
        let tmp_path = self.tmp_dir().join(format!(
            "{}-{}.part",
            std::process::id(),
            UPLOAD_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut tmp = TempFile {
            path: tmp_path.clone(),
            keep: false,
        };
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
            .map_err(io(tmp_path.display().to_string()))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; self.chunk_bytes];
        let mut size = 0u64;
        let mut sniffed: Option<&'static str> = None;
        loop {
            let n = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(&source)(e)),
            };
            let chunk = &buffer[..n];
            if sniffed.is_none() {
                sniffed = Some(sniff_mime(name, chunk));
            }
            hasher.update(chunk);
            out.write_all(chunk)
                .map_err(io(tmp_path.display().to_string()))?;
            size += n as u64;
        }
        out.sync_all().map_err(io(tmp_path.display().to_string()))?;
        drop(out);
        let digest = Sha256Digest::from_bytes(hasher.finalize().into());
        let dest = self.path_of(&digest);
        let parent = dest.parent().unwrap_or(&self.root).to_path_buf();
        fs::create_dir_all(&parent).map_err(io(parent.display().to_string()))?;
        if dest.exists() {
            // Same bytes uploaded before: keep the published copy, drop this one.
            let existing = fs::metadata(&dest).map_err(io(dest.display().to_string()))?;
            if existing.len() != size {
                return Err(ObjectError::SizeMismatch {
                    uri: dest.display().to_string(),
                    expected: size,
                    actual: existing.len(),
                });
            }
        } else {
            let mut perms = fs::metadata(&tmp_path)
                .map_err(io(tmp_path.display().to_string()))?
                .permissions();
            perms.set_readonly(true);
            fs::set_permissions(&tmp_path, perms).map_err(io(tmp_path.display().to_string()))?;
            fs::rename(&tmp_path, &dest).map_err(io(dest.display().to_string()))?;
            tmp.keep = true;
            File::open(&parent)
                .and_then(|d| d.sync_all())
                .map_err(io(parent.display().to_string()))?;
        }
        let mime = mime
            .map(str::to_string)
            .unwrap_or_else(|| sniffed.unwrap_or("application/octet-stream").to_string());
        Ok(DataLocation::new(
            format!("file://{}", dest.display()),
            mime,
            size,
            digest,
        ))
    }
}
