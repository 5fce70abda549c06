//! The local managed-object store under `<data-dir>/objects`.
//!
//! Layout:
//!
//! ```text
//! objects/sha256/<first two hex digits>/<remaining 62>   published objects, read-only
//! objects/.tmp/upload.<unique>.part                       uploads in progress (flock-held)
//! objects/.pins/<sha256>.<unique>.pin                     in-flight INSERTs' pins (flock-held)
//! objects/.lock                                           the store lock (see `lock`)
//! ```
//!
//! An upload copies its source in bounded chunks (1 MiB by default) while hashing into a
//! uniquely named temporary file, fsyncs it, and then publishes under the shared store
//! lock: it pins the digest, and either renames the temporary file to its content address
//! (fsyncing the directory), or — when that address exists — checks the stored copy's
//! size and digest, refreshes its modification time (so a collector that started earlier
//! keeps it) or, if the stored copy is damaged, replaces it with the new, verified bytes.
//! A crash or a failed read never leaves a partial object where readers look. Something
//! other than a regular file at the address (a FIFO, a directory) is refused, naming it,
//! without being opened for a blocking read (see `regular_file`).
//!
//! Locations name objects relative to the data directory (`objects/sha256/ab/cd…`), so
//! a lake can be moved or mounted elsewhere; [`ManagedObjectStore::file_url`] gives the
//! absolute `file://` URL for display.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::error::io;
use crate::lock::StoreLock;
use crate::mime::sniff_mime;
use crate::pin::ObjectPin;
use crate::regular_file::open_regular;
use crate::unique::create_unique;
use crate::{DataLocation, ObjectError, Sha256Digest};

/// Bytes copied per read by default: bounded memory whatever the object's size.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

/// The prefix of every location this store writes: relative to the data directory.
pub const RELATIVE_PREFIX: &str = "objects/sha256/";

/// fsyncs a directory, so that entries created or renamed in it survive a power loss.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ObjectError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir.display().to_string()))
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

/// How an upload's bytes reached their content address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The object was new: the upload's file was renamed into place.
    New,
    /// The same bytes were stored and verified; their modification time was refreshed.
    Deduplicated,
    /// A stored copy with this address was damaged and has been replaced by these bytes.
    Repaired,
}

impl ManagedObjectStore {
    /// The store of `data_dir` (its `objects` directory is created if missing).
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, ObjectError> {
        let root = data_dir.as_ref().join("objects");
        for dir in [root.join("sha256"), root.join(".tmp"), root.join(".pins")] {
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

    /// The data directory the store's locations are relative to.
    pub fn data_dir(&self) -> &Path {
        self.root.parent().unwrap_or(&self.root)
    }

    /// Where the object with `digest` lives.
    pub fn path_of(&self, digest: &Sha256Digest) -> PathBuf {
        let hex = digest.to_string();
        self.root.join("sha256").join(&hex[..2]).join(&hex[2..])
    }

    /// The location URI of `digest`: `objects/sha256/<2>/<62>`, relative to the data dir.
    pub fn relative_uri(digest: &Sha256Digest) -> String {
        let hex = digest.to_string();
        format!("{RELATIVE_PREFIX}{}/{}", &hex[..2], &hex[2..])
    }

    /// The location of the stored object `digest` (size from the file; MIME unknown).
    pub fn location_of(&self, digest: &Sha256Digest) -> Result<DataLocation, ObjectError> {
        let path = self.path_of(digest);
        let size = fs::metadata(&path)
            .map_err(io(Self::relative_uri(digest)))?
            .len();
        Ok(DataLocation::new(
            Self::relative_uri(digest),
            "application/octet-stream",
            size,
            *digest,
        ))
    }

    /// Directory of uploads in progress.
    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.root.join(".tmp")
    }

    /// Directory of pins.
    pub(crate) fn pins_dir(&self) -> PathBuf {
        self.root.join(".pins")
    }

    /// The store lock's file.
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.root.join(".lock")
    }

    /// Streams the local file `source` into the store. `mime` overrides the type sniffed
    /// from the content and extension.
    ///
    /// The object is not pinned: only the retention window protects it from garbage
    /// collection until a committed row references it. An INSERT uses
    /// [`Self::put_file_pinned`].
    pub fn put_file(&self, source: &Path, mime: Option<&str>) -> Result<DataLocation, ObjectError> {
        Ok(self.put_file_pinned(source, mime)?.0)
    }

    /// Like [`Self::put_file`], and returns a pin that keeps garbage collection off the
    /// object until it is dropped (after the commit that references it ends).
    pub fn put_file_pinned(
        &self,
        source: &Path,
        mime: Option<&str>,
    ) -> Result<(DataLocation, ObjectPin), ObjectError> {
        let name = source.display().to_string();
        let file = File::open(source).map_err(io(&name))?;
        self.put_reader_pinned(file, source, mime)
    }

    /// Streams `reader` into the store; `name` is used for MIME sniffing and messages.
    pub fn put_reader(
        &self,
        reader: impl Read,
        name: &Path,
        mime: Option<&str>,
    ) -> Result<DataLocation, ObjectError> {
        Ok(self.put_reader_pinned(reader, name, mime)?.0)
    }

    /// Like [`Self::put_reader`], returning the object's pin as well.
    pub fn put_reader_pinned(
        &self,
        mut reader: impl Read,
        name: &Path,
        mime: Option<&str>,
    ) -> Result<(DataLocation, ObjectPin), ObjectError> {
        let source = name.display().to_string();
        let (tmp_path, mut out) = create_unique(&self.tmp_dir(), "upload", "part")?;
        let tmp_uri = tmp_path.display().to_string();
        let mut tmp = TempFile {
            path: tmp_path.clone(),
            keep: false,
        };
        // Held until the file is published or removed: a collector skips locked uploads.
        out.lock().map_err(io(&tmp_uri))?;
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
            out.write_all(chunk).map_err(io(&tmp_uri))?;
            size += n as u64;
        }
        out.sync_all().map_err(io(&tmp_uri))?;
        let mut perms = out.metadata().map_err(io(&tmp_uri))?.permissions();
        perms.set_readonly(true);
        out.set_permissions(perms).map_err(io(&tmp_uri))?;
        let digest = Sha256Digest::from_bytes(hasher.finalize().into());

        let (pin, published) = self.publish(&tmp_path, digest, size)?;
        tmp.keep = published != Published::Deduplicated;
        drop(out);
        if published == Published::Repaired {
            tracing::warn!(sha256 = %digest, "replaced a damaged stored copy with verified bytes");
        }
        let mime = mime
            .map(str::to_string)
            .unwrap_or_else(|| sniffed.unwrap_or("application/octet-stream").to_string());
        Ok((
            DataLocation::new(Self::relative_uri(&digest), mime, size, digest),
            pin,
        ))
    }

    /// Puts the fsynced, read-only upload `tmp_path` (of `size` bytes hashing to
    /// `digest`) at its content address, pinned, under the shared store lock.
    fn publish(
        &self,
        tmp_path: &Path,
        digest: Sha256Digest,
        size: u64,
    ) -> Result<(ObjectPin, Published), ObjectError> {
        let dest = self.path_of(&digest);
        let dest_uri = dest.display().to_string();
        let parent = dest.parent().unwrap_or(&self.root).to_path_buf();
        if !parent.is_dir() {
            fs::create_dir_all(&parent).map_err(io(parent.display().to_string()))?;
            sync_dir(&self.root.join("sha256"))?;
        }
        let _lock = StoreLock::shared(&self.lock_path())?;
        // Pinned before looking: a collector holding the lock exclusively either ran
        // before (the object is gone or kept) or runs after (and sees the pin).
        let pin = ObjectPin::take(&self.pins_dir(), digest)?;
        let published = match self.stored_copy(&dest, digest, size)? {
            StoredCopy::Intact(file) => {
                // The same bytes are stored: refresh their age so that a collector whose
                // run began before this upload keeps them.
                file.set_modified(SystemTime::now())
                    .map_err(io(&dest_uri))?;
                Published::Deduplicated
            }
            StoredCopy::Damaged => {
                fs::rename(tmp_path, &dest).map_err(io(&dest_uri))?;
                Published::Repaired
            }
            StoredCopy::Missing => {
                fs::rename(tmp_path, &dest).map_err(io(&dest_uri))?;
                Published::New
            }
        };
        if published != Published::Deduplicated {
            sync_dir(&parent)?;
        }
        Ok((pin, published))
    }

    /// What is stored at `dest`, the address of `size` bytes hashing to `digest`.
    /// Something there that is not a regular file (a FIFO, a directory) is an error
    /// naming it, found without blocking: this runs under the store's shared lock.
    fn stored_copy(
        &self,
        dest: &Path,
        digest: Sha256Digest,
        size: u64,
    ) -> Result<StoredCopy, ObjectError> {
        let uri = dest.display().to_string();
        let (mut file, metadata) = match open_regular(dest, &uri) {
            Ok(opened) => opened,
            Err(ObjectError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(StoredCopy::Missing);
            }
            Err(e) => return Err(e),
        };
        if metadata.len() != size {
            return Ok(StoredCopy::Damaged);
        }
        let actual = crate::digest::hash_reader(&mut file, self.chunk_bytes).map_err(io(&uri))?;
        Ok(if actual == digest {
            StoredCopy::Intact(file)
        } else {
            StoredCopy::Damaged
        })
    }
}

/// What an upload finds at its content address.
enum StoredCopy {
    /// Nothing.
    Missing,
    /// Exactly its bytes, in this file (open, so the copy checked is the one refreshed).
    Intact(File),
    /// A regular file with other bytes or another length.
    Damaged,
}
