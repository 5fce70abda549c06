//! [`ParquetFooterGuard`]: an `ObjectStore` wrapper that refuses to hand a Parquet reader
//! a trailer announcing more footer bytes than its file holds.
//!
//! # Why a store wrapper
//!
//! parquet 59.3.2's `ParquetMetaDataPushDecoder::try_decode` (file/metadata/push_decoder.rs,
//! state `ReadingMetadata`) computes the footer's start as
//! `file_len - FOOTER_SIZE - metadata_len` without checking it, as soon as it holds the
//! file's last 8 bytes. A trailer whose metadata length exceeds the file underflows
//! there: a panic where overflow checks are on (every debug and test build), a wild range
//! otherwise. DataFusion 55 reaches that decoder on every Parquet read — schema inference
//! when a table is registered or `CREATE EXTERNAL TABLE` runs, statistics, and each scan's
//! opener (`DFParquetMetadata::fetch_metadata_from_store`, a `get_ranges` of the trailer
//! or of the metadata size hint) — and parquet's `ParquetObjectReader` reaches it through
//! a suffix `get_opts`. Each fetches the trailer from the table's object store first.
//!
//! ```text
//!  listing table / snapshot files / external table / executor task
//!        │ get_ranges(last bytes) or get_opts(suffix)
//!        ▼
//!  ParquetFooterGuard ── trailer announces a footer that does not fit? ──► typed error
//!        │ otherwise, the bytes unchanged
//!        ▼
//!  ParquetMetaDataPushDecoder (never sees an impossible length)
//! ```
//!
//! So checking the trailer as it leaves the store covers every table provider and
//! file-reader factory alike, on every member whose `RuntimeEnv` has the guard
//! (`oxidelake-runtime` installs it on sessions, the scheduler and executors). A custom
//! `ParquetFileReaderFactory` would only cover scans planned with it, not schema
//! inference nor providers built elsewhere.
//!
//! # What is checked
//!
//! A read whose bytes end where the object ends, in a Parquet magic (`PAR1`, or `PARE` for
//! an encrypted footer), must announce a footer that fits in the object beside both
//! magics; otherwise it fails with [`StorageError::ParquetFooter`] inside
//! `object_store::Error::Generic`. The file name plays no part (`CREATE EXTERNAL TABLE …
//! LOCATION` may name a Parquet file of any name); other bytes — data pages, CSV, IPC —
//! pass untouched. Cost: `get_ranges` calls `head` only when a returned range ends in a
//! Parquet magic (in practice the trailer fetch); a ranged `get_opts` reaching the
//! object's end reads its last 8 bytes once more.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

use crate::StorageError;

/// The name the guard gives `object_store::Error::Generic`.
const STORE_NAME: &str = "ParquetFooterGuard";

/// A Parquet file ends in its footer's length (u32, little-endian) and a magic.
pub(crate) const TRAILER_BYTES: usize = 8;

/// Parquet's smallest possible file: leading magic, footer length, trailing magic.
pub(crate) const MIN_PARQUET_BYTES: u64 = 12;

/// The footer length a Parquet trailer announces, or `None` when `tail` does not end in a
/// Parquet magic.
fn announced_footer_bytes(tail: &[u8; TRAILER_BYTES]) -> Option<u64> {
    let magic = [tail[4], tail[5], tail[6], tail[7]];
    (magic == *b"PAR1" || magic == *b"PARE")
        .then(|| u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]])))
}

/// Why a footer of `footer_bytes` cannot be in a `file_len`-byte file, if it cannot.
pub(crate) fn footer_misfit(footer_bytes: u64, file_len: u64) -> Option<String> {
    (footer_bytes + MIN_PARQUET_BYTES > file_len)
        .then(|| format!("footer length {footer_bytes} does not fit in a {file_len}-byte file"))
}

/// The last [`TRAILER_BYTES`] of `bytes`, when it has that many.
fn trailer_of(bytes: &[u8]) -> Option<[u8; TRAILER_BYTES]> {
    let start = bytes.len().checked_sub(TRAILER_BYTES)?;
    bytes[start..].try_into().ok()
}

/// An [`ObjectStore`] that forwards everything to the store it wraps and fails a read
/// that would hand a Parquet reader an impossible footer length (see the module docs).
#[derive(Debug)]
pub struct ParquetFooterGuard {
    inner: Arc<dyn ObjectStore>,
}

impl ParquetFooterGuard {
    /// Guards the reads of `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner }
    }

    /// The guarded store.
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// Fails when `tail`, the last bytes of the `file_len`-byte object `location`, is a
    /// Parquet trailer whose footer cannot fit.
    fn check(location: &Path, tail: &[u8; TRAILER_BYTES], file_len: u64) -> Result<()> {
        let Some(detail) =
            announced_footer_bytes(tail).and_then(|footer| footer_misfit(footer, file_len))
        else {
            return Ok(());
        };
        Err(object_store::Error::Generic {
            store: STORE_NAME,
            source: Box::new(StorageError::ParquetFooter {
                path: location.to_string(),
                detail,
            }),
        })
    }
}

impl fmt::Display for ParquetFooterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{STORE_NAME}({})", self.inner)
    }
}

/// Wraps the `file://` store of `env` — DataFusion's `LocalFileSystem`, or whatever is
/// registered for `file://` now, such as the io_uring store — in a [`ParquetFooterGuard`].
/// Call it after any other `file://` store is registered; a store already guarded is left
/// as it is (recognized by its `Display`, which only this type writes).
pub fn guard_local_parquet_reads(env: &RuntimeEnv) -> datafusion::error::Result<()> {
    let url = ObjectStoreUrl::local_filesystem();
    let inner = env.object_store(&url)?;
    if inner.to_string().starts_with(STORE_NAME) {
        return Ok(());
    }
    let guarded: Arc<dyn ObjectStore> = Arc::new(ParquetFooterGuard::new(inner));
    env.register_object_store(url.as_ref(), guarded);
    Ok(())
}

#[async_trait]
impl ObjectStore for ParquetFooterGuard {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    /// A ranged read that reaches the object's end is checked: its last 8 bytes are read
    /// once more (the payload itself is returned unread).
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let ranged = options.range.is_some() && !options.head;
        let result = self.inner.get_opts(location, options).await?;
        let file_len = result.meta.size;
        let reaches_end =
            result.range.end == file_len && file_len - result.range.start >= TRAILER_BYTES as u64;
        if ranged && reaches_end {
            let tail_range = file_len - TRAILER_BYTES as u64..file_len;
            let tail = self.inner.get_range(location, tail_range).await?;
            if let Some(tail) = trailer_of(&tail) {
                Self::check(location, &tail, file_len)?;
            }
        }
        Ok(result)
    }

    /// Reads through the wrapped store; a returned range ending in a Parquet magic is
    /// checked against the object's length (one `head` per call).
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let buffers = self.inner.get_ranges(location, ranges).await?;
        let mut file_len = None;
        for (range, bytes) in ranges.iter().zip(&buffers) {
            let Some(tail) = trailer_of(bytes) else {
                continue;
            };
            if announced_footer_bytes(&tail).is_none() {
                continue;
            }
            let len = match file_len {
                Some(len) => len,
                None => {
                    let len = self.inner.head(location).await?.size;
                    file_len = Some(len);
                    len
                }
            };
            if range.end == len {
                Self::check(location, &tail, len)?;
            }
        }
        Ok(buffers)
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

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // get_ranges takes a slice of ranges
mod tests {
    use object_store::memory::InMemory;

    use super::*;

    /// A 20-byte object: leading magic, 8 bytes of "metadata", then a trailer announcing
    /// `footer` bytes and ending in `magic`.
    fn object(footer: u32, magic: &[u8; 4]) -> Bytes {
        let mut bytes = b"PAR1metadata".to_vec();
        bytes.extend_from_slice(&footer.to_le_bytes());
        bytes.extend_from_slice(magic);
        Bytes::from(bytes)
    }

    async fn guarded(bytes: Bytes) -> (ParquetFooterGuard, Path) {
        let store = InMemory::new();
        let path = Path::from("lake/x.parquet");
        store.put(&path, PutPayload::from(bytes)).await.unwrap();
        (ParquetFooterGuard::new(Arc::new(store)), path)
    }

    fn is_footer_error(err: &object_store::Error) -> bool {
        let object_store::Error::Generic { source, .. } = err else {
            return false;
        };
        matches!(
            source.downcast_ref::<StorageError>(),
            Some(StorageError::ParquetFooter { path, .. }) if path == "lake/x.parquet"
        )
    }

    #[tokio::test]
    async fn a_tail_read_announcing_a_footer_longer_than_the_object_is_a_typed_error() {
        let (store, path) = guarded(object(80, b"PAR1")).await;
        let err = store.get_ranges(&path, &[12..20]).await.unwrap_err();
        assert!(is_footer_error(&err), "{err:?}");
        let err = store.get_ranges(&path, &[0..20]).await.unwrap_err();
        assert!(is_footer_error(&err), "{err:?}");
        let suffix = GetOptions::new().with_range(Some(object_store::GetRange::Suffix(8)));
        let err = store.get_opts(&path, suffix).await.unwrap_err();
        assert!(is_footer_error(&err), "{err:?}");
        let err = store.get_range(&path, 4..20).await.unwrap_err();
        assert!(is_footer_error(&err), "{err:?}");
    }

    #[test]
    fn guarding_a_runtime_env_twice_wraps_its_file_store_once() {
        let env = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .build()
            .unwrap();
        guard_local_parquet_reads(&env).unwrap();
        guard_local_parquet_reads(&env).unwrap();
        let store = env
            .object_store(ObjectStoreUrl::local_filesystem())
            .unwrap()
            .to_string();
        assert_eq!(store.matches(STORE_NAME).count(), 1, "{store}");
    }

    #[tokio::test]
    async fn fitting_footers_other_bytes_and_reads_short_of_the_end_pass_unchanged() {
        let (store, path) = guarded(object(8, b"PAR1")).await;
        assert_eq!(
            store.get_ranges(&path, &[12..20]).await.unwrap()[0].len(),
            8
        );
        let (store, path) = guarded(object(80, b"CSV\n")).await;
        assert_eq!(store.get_range(&path, 0..20).await.unwrap().len(), 20);
        // Bytes ending in a magic short of the object's end are not its trailer.
        let mut bytes = object(80, b"PAR1").to_vec();
        bytes.extend_from_slice(b"PAR1metadata");
        let (longer, longer_path) = guarded(Bytes::from(bytes)).await;
        assert_eq!(
            longer.get_ranges(&longer_path, &[0..20]).await.unwrap()[0],
            object(80, b"PAR1")
        );
        // A whole-object get is not a Parquet reader's request.
        let (store, path) = guarded(object(80, b"PAR1")).await;
        assert_eq!(
            store.get(&path).await.unwrap().bytes().await.unwrap().len(),
            20
        );
    }
}
