//! [`UringLocalFileSystem`] and its `ObjectStore` implementation.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, Result,
};

use super::error::UringError;
use super::fs::{
    StagingGuard, blocking, commit_staged, create_staging_file, open_file, open_object,
};
use super::io::{read_exact_at, read_stream, write_payload};
use super::ring::RingHandle;

/// An [`ObjectStore`] for local files whose data reads and writes are io_uring
/// operations, driven by one dedicated ring thread.
///
/// # What goes through the ring
///
/// | Operation                                   | How                                              |
/// |---------------------------------------------|--------------------------------------------------|
/// | `get_opts` payload bytes, `get_ranges`      | `IORING_OP_READ` at offsets, short reads looped  |
/// | `put_opts` payload bytes                    | `IORING_OP_WRITE` at offsets into a staging file |
/// | open, `fstat`, staging-file create, rename  | `std::fs` on tokio's blocking pool               |
/// | `list*`, `delete*`, `copy*`, `rename*`      | the inner `LocalFileSystem` at the same root     |
/// | multipart uploads                           | the inner `LocalFileSystem` at the same root     |
///
/// Paths, `ObjectMeta` (size, last-modified, e-tag), staging-file naming, conditional
/// requests and errors (NotFound, AlreadyExists) match `LocalFileSystem`'s, so the two
/// stores are interchangeable on the same directory. Clones share one ring thread, which
/// stops when the last clone and the last stream returned by a `get` are dropped.
///
/// Where the kernel refuses io_uring (seccomp, `kernel.io_uring_disabled`, no kernel
/// support), construction fails naming the errno; [`probe_io_uring`](crate::probe_io_uring)
/// tells beforehand.
#[derive(Debug, Clone)]
pub struct UringLocalFileSystem {
    inner: LocalFileSystem,
    ring: RingHandle,
    root: PathBuf,
}

impl UringLocalFileSystem {
    /// A store with no prefix (locations are absolute paths), like
    /// [`LocalFileSystem::new`]. Fails, naming the errno, where io_uring is refused.
    pub fn new() -> Result<Self> {
        Self::with_inner(LocalFileSystem::new(), PathBuf::from("/"))
    }

    /// A store rooted at the existing directory `prefix`, like
    /// [`LocalFileSystem::new_with_prefix`]. Fails if `prefix` does not exist, or,
    /// naming the errno, where io_uring is refused.
    pub fn new_with_prefix(prefix: impl AsRef<std::path::Path>) -> Result<Self> {
        let prefix = prefix.as_ref();
        let inner = LocalFileSystem::new_with_prefix(prefix)?;
        let root = std::fs::canonicalize(prefix).map_err(|source| UringError::Open {
            path: prefix.to_path_buf(),
            source,
        })?;
        Self::with_inner(inner, root)
    }

    fn with_inner(inner: LocalFileSystem, root: PathBuf) -> Result<Self> {
        let ring = RingHandle::start()?;
        Ok(UringLocalFileSystem { inner, ring, root })
    }

    /// Data operations (reads and writes, each short-read continuation counted) the
    /// kernel has completed on this store's ring, across all clones.
    pub fn ops_completed(&self) -> u64 {
        self.ring.ops_completed()
    }

    /// The absolute filesystem path of `location`, as
    /// [`LocalFileSystem::path_to_filesystem`] maps it.
    pub fn path_to_filesystem(&self, location: &Path) -> Result<PathBuf> {
        self.inner.path_to_filesystem(location)
    }
}

impl fmt::Display for UringLocalFileSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UringLocalFileSystem({})", self.root.display())
    }
}

#[async_trait]
impl ObjectStore for UringLocalFileSystem {
    /// Writes the payload through the ring into `{path}#{n}` and renames it into place
    /// (`hard_link` for [`PutMode::Create`]), as `LocalFileSystem` does.
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let create_only = match opts.mode {
            PutMode::Overwrite => false,
            PutMode::Create => true,
            PutMode::Update(_) => {
                return Err(object_store::Error::NotImplemented {
                    operation: "`put_opts` with mode `PutMode::Update`".into(),
                    implementer: self.to_string(),
                });
            }
        };
        if !opts.attributes.is_empty() {
            return Err(object_store::Error::NotImplemented {
                operation: "`put_opts` with `opts.attributes` specified".into(),
                implementer: self.to_string(),
            });
        }
        let dest = self.inner.path_to_filesystem(location)?;
        let staging_for = dest.clone();
        let (file, staging) = blocking(move || create_staging_file(&staging_for)).await?;
        let guard = StagingGuard::new(staging.clone());
        let file = Arc::new(file);
        write_payload(&self.ring, &file, &staging, &payload).await?;
        let staging = guard.disarm();
        blocking(move || commit_staged(file, &staging, &dest, create_only)).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    /// Opens and `fstat`s the file on the blocking pool, checks the preconditions, and
    /// returns a lazy stream whose bytes are read through the ring.
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let path = self.inner.path_to_filesystem(location)?;
        let opened = (path.clone(), location.clone());
        let (file, meta) = blocking(move || open_object(&opened.0, opened.1)).await?;
        options.check_preconditions(&meta)?;
        let range = match &options.range {
            Some(range) => {
                range
                    .as_range(meta.size)
                    .map_err(|source| UringError::InvalidRange {
                        path: path.clone(),
                        source: Box::new(source),
                    })?
            }
            None => 0..meta.size,
        };
        let payload = read_stream(self.ring.clone(), Arc::new(file), path, range.clone());
        Ok(GetResult {
            payload: GetResultPayload::Stream(payload),
            meta,
            range,
            attributes: Attributes::default(),
        })
    }

    /// Reads every range concurrently through the ring (one open, no coalescing).
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let path = self.inner.path_to_filesystem(location)?;
        let to_open = path.clone();
        let file = Arc::new(blocking(move || open_file(&to_open)).await?);
        let reads = ranges
            .iter()
            .map(|range| read_exact_at(&self.ring, &file, &path, range.clone()));
        Ok(futures::future::try_join_all(reads).await?)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
