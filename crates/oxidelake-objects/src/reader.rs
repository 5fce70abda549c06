//! Reading managed objects back, verified: only locations inside the store are opened,
//! and the bytes must be exactly as many, and hash to exactly what, the location says.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

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
            if self.read != self.location.size() {
                return Err(invalid(ObjectError::SizeMismatch {
                    uri: self.location.uri().to_string(),
                    expected: self.location.size(),
                    actual: self.read,
                }));
            }
            let actual =
                Sha256Digest::from_bytes(std::mem::take(&mut self.hasher).finalize().into());
            if actual != self.location.sha256() {
                return Err(invalid(ObjectError::DigestMismatch {
                    uri: self.location.uri().to_string(),
                    expected: self.location.sha256(),
                    actual,
                }));
            }
        }
        Ok(0)
    }
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

impl ManagedObjectStore {
    /// The store path of `location`, refusing anything that is not a `file://` URI
    /// inside this store (other schemes, relative paths, `..`, symlinks out).
    pub fn resolve(&self, location: &DataLocation) -> Result<PathBuf, ObjectError> {
        let uri = location.uri();
        let refuse = |reason: &str| ObjectError::OutsideStore {
            uri: uri.to_string(),
            reason: reason.to_string(),
        };
        let path = uri
            .strip_prefix("file://")
            .ok_or_else(|| refuse("not a file:// URI"))?;
        let path = Path::new(path);
        if !path.is_absolute() {
            return Err(refuse("not an absolute path"));
        }
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(refuse("contains `..`"));
        }
        let canonical = path.canonicalize().map_err(|source| ObjectError::Io {
            uri: uri.to_string(),
            source,
        })?;
        if !canonical.starts_with(self.root().join("sha256")) {
            return Err(refuse("outside the managed object store"));
        }
        Ok(canonical)
    }

    /// Opens `location` for verified reading.
    pub fn open_verified(&self, location: &DataLocation) -> Result<VerifiedReader, ObjectError> {
        let path = self.resolve(location)?;
        let file = File::open(&path).map_err(|source| ObjectError::Io {
            uri: location.uri().to_string(),
            source,
        })?;
        let len = file
            .metadata()
            .map_err(|source| ObjectError::Io {
                uri: location.uri().to_string(),
                source,
            })?
            .len();
        if len != location.size() {
            return Err(ObjectError::SizeMismatch {
                uri: location.uri().to_string(),
                expected: location.size(),
                actual: len,
            });
        }
        Ok(VerifiedReader {
            file,
            hasher: Sha256::new(),
            location: location.clone(),
            read: 0,
            checked: false,
        })
    }

    /// All bytes of `location`, verified.
    pub fn read_verified(&self, location: &DataLocation) -> Result<Vec<u8>, ObjectError> {
        let mut bytes = Vec::with_capacity(usize::try_from(location.size()).unwrap_or(0));
        self.open_verified(location)?
            .read_to_end(&mut bytes)
            .map_err(verification_error)?;
        Ok(bytes)
    }

    /// Reads `location` through and checks its size and digest.
    pub fn verify(&self, location: &DataLocation) -> Result<(), ObjectError> {
        let mut reader = self.open_verified(location)?;
        std::io::copy(&mut reader, &mut std::io::sink()).map_err(verification_error)?;
        Ok(())
    }
}
