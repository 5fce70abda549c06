//! Reading managed objects back, verified: only locations of this store are opened, and
//! the bytes must be exactly as many, and hash to exactly what, the location says.
//!
//! Two ways to read:
//!
//! - [`ManagedObjectStore::open_verified`] hashes the whole object *before* it returns a
//!   reader, so no byte reaches the caller unverified (a reader that stops early has
//!   still read verified bytes). It costs a second pass over the object; the reader
//!   keeps hashing and still fails at the end if the file changed in between.
//! - [`ManagedObjectStore::open_streaming`] reads once and verifies at the end: the
//!   bytes it yields are **unverified** until it returns end-of-file successfully. For
//!   callers that can discard output on error (a pipeline that checks the exit status).

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::regular_file::open_regular;
use crate::store::RELATIVE_PREFIX;
use crate::{DataLocation, ManagedObjectStore, ObjectError, Sha256Digest};

/// A reader of one object that fails (with `InvalidData`, wrapping the digest error)
/// at the end of the stream when the bytes are not the recorded ones.
#[derive(Debug)]
pub struct VerifiedReader {
    file: File,
    hasher: Sha256,
    location: DataLocation,
    read: u64,
    checked: bool,
    verified_up_front: bool,
}

impl VerifiedReader {
    /// Whether every byte was verified before the first one was returned
    /// ([`ManagedObjectStore::open_verified`]) rather than at end-of-file.
    pub fn verified_up_front(&self) -> bool {
        self.verified_up_front
    }
}

impl Read for VerifiedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        if n > 0 {
            self.hasher.update(&buf[..n]);
            self.read += n as u64;
            if self.read > self.location.size() {
                return Err(invalid(ObjectError::SizeMismatch {
                    uri: self.location.uri().to_string(),
                    expected: self.location.size(),
                    actual: self.read,
                }));
            }
            return Ok(n);
        }
        if !self.checked && !buf.is_empty() {
            self.checked = true;
            check(
                &self.location,
                self.read,
                std::mem::take(&mut self.hasher).finalize().into(),
            )
            .map_err(invalid)?;
        }
        Ok(0)
    }
}

fn check(location: &DataLocation, read: u64, digest: [u8; 32]) -> Result<(), ObjectError> {
    if read != location.size() {
        return Err(ObjectError::SizeMismatch {
            uri: location.uri().to_string(),
            expected: location.size(),
            actual: read,
        });
    }
    let actual = Sha256Digest::from_bytes(digest);
    if actual != location.sha256() {
        return Err(ObjectError::DigestMismatch {
            uri: location.uri().to_string(),
            expected: location.sha256(),
            actual,
        });
    }
    Ok(())
}

fn invalid(err: ObjectError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, err)
}

/// The `ObjectError` inside an error from a [`VerifiedReader`], if it is one.
pub fn verification_error(err: std::io::Error) -> ObjectError {
    let uri = err.to_string();
    match err
        .into_inner()
        .map(|inner| inner.downcast::<ObjectError>())
    {
        Some(Ok(object)) => *object,
        Some(Err(other)) => ObjectError::Io {
            uri,
            source: std::io::Error::other(other),
        },
        None => ObjectError::Io {
            uri: uri.clone(),
            source: std::io::Error::other(uri),
        },
    }
}

/// The path a legacy absolute `file://` location names: the raw text after the scheme
/// (how early versions wrote it) and its RFC 8089 percent-decoded reading.
fn legacy_paths(uri: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(raw) = uri.strip_prefix("file://") {
        out.push(PathBuf::from(raw));
    }
    if let Ok(path) = url::Url::parse(uri).and_then(|u| {
        u.to_file_path()
            .map_err(|()| url::ParseError::RelativeUrlWithoutBase)
    }) {
        out.push(path);
    }
    out
}

/// Whether `path` ends in `objects/sha256/<2>/<62>` naming `digest`, with no `..`.
fn names_object(path: &Path, digest: &Sha256Digest) -> bool {
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return false;
    }
    let tail: Vec<&str> = path
        .components()
        .rev()
        .take(4)
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    let hex = digest.to_string();
    tail == [&hex[2..], &hex[..2], "sha256", "objects"]
}

impl ManagedObjectStore {
    /// The store path of `location`.
    ///
    /// Locations are `objects/sha256/<2>/<62>` relative to the data directory, naming
    /// the location's own digest. Absolute `file://` locations written by earlier
    /// versions are accepted when their path ends in that same relative form (so a lake
    /// that moved still resolves, to *this* store). Everything else is refused: other
    /// schemes, other relative paths, `..`, paths outside a store, a path naming another
    /// digest, and a stored file that is a symlink leading out of the store.
    pub fn resolve(&self, location: &DataLocation) -> Result<PathBuf, ObjectError> {
        let uri = location.uri();
        let refuse = |reason: &str| ObjectError::OutsideStore {
            uri: uri.to_string(),
            reason: reason.to_string(),
        };
        let digest = location.sha256();
        if uri.starts_with("file://") {
            let paths = legacy_paths(uri);
            if !paths.iter().any(|p| p.is_absolute()) {
                return Err(refuse("not an absolute path"));
            }
            if paths
                .iter()
                .any(|p| p.components().any(|c| matches!(c, Component::ParentDir)))
            {
                return Err(refuse("contains `..`"));
            }
            if !paths.iter().any(|p| names_object(p, &digest)) {
                return Err(refuse("outside the managed object store"));
            }
        } else if uri.contains("://") || !uri.starts_with(RELATIVE_PREFIX) {
            return Err(refuse("not a location of a managed object store"));
        } else if uri != Self::relative_uri(&digest) {
            return Err(refuse("does not name the object's own sha256"));
        }
        let path = self.path_of(&digest);
        let canonical = path.canonicalize().map_err(|source| ObjectError::Io {
            uri: uri.to_string(),
            source,
        })?;
        if !canonical.starts_with(self.root().join("sha256")) {
            return Err(refuse("outside the managed object store"));
        }
        Ok(canonical)
    }

    /// The absolute, percent-encoded `file://` URL of `location` in this store (RFC
    /// 8089), for display and for tools that want a URL. Rows store the relative form.
    pub fn file_url(&self, location: &DataLocation) -> Result<String, ObjectError> {
        let path = self.path_of(&location.sha256());
        url::Url::from_file_path(&path)
            .map(String::from)
            .map_err(|()| {
                ObjectError::InvalidLocation(format!("{} is not absolute", path.display()))
            })
    }

    /// The stored file of `location`, open, once it is known to be a regular file (a
    /// FIFO or a directory there is refused with its path, see `regular_file`) of the
    /// recorded size.
    fn open_checked(&self, location: &DataLocation) -> Result<File, ObjectError> {
        let path = self.resolve(location)?;
        let (file, metadata) = open_regular(&path, location.uri())?;
        let len = metadata.len();
        if len != location.size() {
            return Err(ObjectError::SizeMismatch {
                uri: location.uri().to_string(),
                expected: location.size(),
                actual: len,
            });
        }
        Ok(file)
    }

    /// Opens `location` after verifying all of its bytes: nothing unverified is ever
    /// returned. The reader re-hashes as it goes and fails at the end if the file
    /// changed after the check.
    pub fn open_verified(&self, location: &DataLocation) -> Result<VerifiedReader, ObjectError> {
        let mut reader = VerifiedReader {
            file: self.open_checked(location)?,
            hasher: Sha256::new(),
            location: location.clone(),
            read: 0,
            checked: false,
            verified_up_front: true,
        };
        std::io::copy(&mut reader, &mut std::io::sink()).map_err(verification_error)?;
        reader.file.rewind().map_err(|source| ObjectError::Io {
            uri: location.uri().to_string(),
            source,
        })?;
        reader.hasher = Sha256::new();
        reader.read = 0;
        reader.checked = false;
        Ok(reader)
    }

    /// Opens `location` for one streaming pass, verified only at end-of-file: the
    /// bytes are **unverified** until the reader returns `Ok(0)`.
    pub fn open_streaming(&self, location: &DataLocation) -> Result<VerifiedReader, ObjectError> {
        Ok(VerifiedReader {
            file: self.open_checked(location)?,
            hasher: Sha256::new(),
            location: location.clone(),
            read: 0,
            checked: false,
            verified_up_front: false,
        })
    }

    /// All bytes of `location`, verified. Memory is reserved only after the stored
    /// file's size matched the recorded one.
    pub fn read_verified(&self, location: &DataLocation) -> Result<Vec<u8>, ObjectError> {
        let mut reader = self.open_streaming(location)?;
        let mut bytes = Vec::with_capacity(usize::try_from(location.size()).unwrap_or(0));
        reader.read_to_end(&mut bytes).map_err(verification_error)?;
        Ok(bytes)
    }

    /// Reads `location` through and checks its size and digest.
    pub fn verify(&self, location: &DataLocation) -> Result<(), ObjectError> {
        let mut reader = self.open_streaming(location)?;
        std::io::copy(&mut reader, &mut std::io::sink()).map_err(verification_error)?;
        Ok(())
    }
}
