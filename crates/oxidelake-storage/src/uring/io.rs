//! Byte transfers over the ring: whole ranges despite short reads, whole buffers despite
//! short writes, and the chunked stream a `get` returns.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::PutPayload;

use super::error::UringError;
use super::op::Op;
use super::ring::RingHandle;

/// Bytes per item of a `get` stream; each item is read by its own operations.
const STREAM_CHUNK_BYTES: u64 = 8 << 20;

/// Stream items read ahead of the consumer.
const STREAM_READ_AHEAD_CHUNKS: usize = 4;

/// Payload chunks of one put written concurrently.
const PUT_CONCURRENT_CHUNKS: usize = 16;

/// Consecutive EINTR/EAGAIN completions an operation retries before failing.
const MAX_TRANSIENT_RETRIES: u32 = 16;

/// Reads exactly `range` of `file` through the ring, looping over short reads.
///
/// Errors like `LocalFileSystem`'s `read_range`: a range starting at or past the end of
/// the file is an invalid range; one that ends past it is out of range.
pub(crate) async fn read_exact_at(
    ring: &RingHandle,
    file: &Arc<File>,
    path: &Path,
    range: Range<u64>,
) -> Result<Bytes, UringError> {
    let want_bytes = range_len(path, &range)?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(want_bytes)
        .map_err(|source| UringError::InvalidRange {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
    let mut retries = 0;
    while buf.len() < want_bytes {
        let offset_bytes = range.start + buf.len() as u64;
        let remaining_bytes = (want_bytes - buf.len()) as u64;
        let op = Op::read(Arc::clone(file), buf, offset_bytes, remaining_bytes);
        let completion = ring.submit(op).await?;
        buf = completion
            .op
            .into_read_buffer()
            .ok_or_else(|| UringError::Read {
                path: path.to_path_buf(),
                offset_bytes,
                source: io::Error::other("a read completed without its buffer"),
            })?;
        match completion.result {
            Ok(0) => return Err(ended_early(file, path, &range, buf.len() as u64)),
            Ok(_) => retries = 0,
            Err(err) if is_transient(&err) && retries < MAX_TRANSIENT_RETRIES => retries += 1,
            Err(source) => {
                return Err(UringError::Read {
                    path: path.to_path_buf(),
                    offset_bytes,
                    source,
                });
            }
        }
    }
    Ok(Bytes::from(buf))
}

/// Writes all of `data` at `offset_bytes` through the ring, looping over short writes.
pub(crate) async fn write_all_at(
    ring: &RingHandle,
    file: &Arc<File>,
    path: &Path,
    mut data: Bytes,
    mut offset_bytes: u64,
) -> Result<(), UringError> {
    let mut retries = 0;
    while !data.is_empty() {
        let op = Op::write(Arc::clone(file), data.clone(), offset_bytes);
        let completion = ring.submit(op).await?;
        match completion.result {
            Ok(0) => {
                return Err(UringError::Write {
                    path: path.to_path_buf(),
                    offset_bytes,
                    source: io::ErrorKind::WriteZero.into(),
                });
            }
            Ok(written) => {
                data = data.slice(written..);
                offset_bytes += written as u64;
                retries = 0;
            }
            Err(err) if is_transient(&err) && retries < MAX_TRANSIENT_RETRIES => retries += 1,
            Err(source) => {
                return Err(UringError::Write {
                    path: path.to_path_buf(),
                    offset_bytes,
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Writes every chunk of `payload` at its offset, several chunks at once.
pub(crate) async fn write_payload(
    ring: &RingHandle,
    file: &Arc<File>,
    path: &Path,
    payload: &PutPayload,
) -> Result<(), UringError> {
    let mut offset_bytes = 0_u64;
    let chunks: Vec<(u64, Bytes)> = payload
        .iter()
        .map(|chunk| {
            let at = offset_bytes;
            offset_bytes += chunk.len() as u64;
            (at, chunk.clone())
        })
        .collect();
    stream::iter(chunks)
        .map(|(at, chunk)| write_all_at(ring, file, path, chunk, at))
        .buffer_unordered(PUT_CONCURRENT_CHUNKS)
        .try_collect::<()>()
        .await
}

/// A lazy stream of `range` of `file` in chunks of [`STREAM_CHUNK_BYTES`]; nothing is
/// read until it is polled (so `head` reads nothing).
pub(crate) fn read_stream(
    ring: RingHandle,
    file: Arc<File>,
    path: PathBuf,
    range: Range<u64>,
) -> BoxStream<'static, object_store::Result<Bytes>> {
    stream::iter(chunk_ranges(range, STREAM_CHUNK_BYTES))
        .map(move |chunk| {
            let ring = ring.clone();
            let file = Arc::clone(&file);
            let path = path.clone();
            async move {
                read_exact_at(&ring, &file, &path, chunk)
                    .await
                    .map_err(object_store::Error::from)
            }
        })
        .buffered(STREAM_READ_AHEAD_CHUNKS)
        .boxed()
}

/// `range` cut into consecutive pieces of at most `chunk_bytes`.
fn chunk_ranges(range: Range<u64>, chunk_bytes: u64) -> impl Iterator<Item = Range<u64>> {
    let mut start = range.start;
    std::iter::from_fn(move || {
        (start < range.end).then(|| {
            let piece = start..range.end.min(start.saturating_add(chunk_bytes));
            start = piece.end;
            piece
        })
    })
}

fn range_len(path: &Path, range: &Range<u64>) -> Result<usize, UringError> {
    let invalid = |detail: String| UringError::InvalidRange {
        path: path.to_path_buf(),
        source: detail.into(),
    };
    let len = range.end.checked_sub(range.start).ok_or_else(|| {
        invalid(format!(
            "range started at {} and ended at {}",
            range.start, range.end
        ))
    })?;
    usize::try_from(len).map_err(|_| invalid(format!("range of {len} bytes exceeds memory")))
}

/// The error for a read that hit end of file after `read_bytes` of `range`.
fn ended_early(file: &File, path: &Path, range: &Range<u64>, read_bytes: u64) -> UringError {
    let file_bytes = match file.metadata() {
        Ok(metadata) => metadata.len(),
        Err(source) => {
            return UringError::Metadata {
                path: path.to_path_buf(),
                source,
            };
        }
    };
    if range.start >= file_bytes {
        return UringError::InvalidRange {
            path: path.to_path_buf(),
            source: format!(
                "wanted range starting at {}, but object was only {file_bytes} bytes long",
                range.start
            )
            .into(),
        };
    }
    UringError::OutOfRange {
        path: path.to_path_buf(),
        expected_bytes: range.end.min(file_bytes) - range.start,
        actual_bytes: read_bytes,
    }
}

fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::time::Duration;

    use super::*;
    use crate::uring::ring::tests::ring_or_skip;

    #[tokio::test]
    async fn read_exact_at_keeps_reading_after_a_short_read() {
        let Some(ring) = ring_or_skip() else { return };
        // A pipe returns what has been written so far: a deterministic short read.
        let (reader, mut writer) = std::io::pipe().unwrap();
        let file = Arc::new(File::from(OwnedFd::from(reader)));
        writer.write_all(b"abc").unwrap();
        let watcher = ring.clone();
        let feeder = std::thread::spawn(move || {
            // Only after the first (short) read has completed does the rest arrive.
            while watcher.ops_completed() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            writer.write_all(b"defg").unwrap();
        });

        let bytes = read_exact_at(&ring, &file, Path::new("pipe"), 0..7)
            .await
            .unwrap();

        feeder.join().unwrap();
        assert_eq!(&bytes[..], b"abcdefg");
        assert_eq!(ring.ops_completed(), 2, "one short read, one for the rest");
    }

    #[tokio::test]
    async fn read_past_end_of_file_reports_the_bytes_actually_there() {
        let Some(ring) = ring_or_skip() else { return };
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(b"0123456789").unwrap();
        let file = Arc::new(File::open(tmp.path()).unwrap());

        let err = read_exact_at(&ring, &file, tmp.path(), 4..20)
            .await
            .unwrap_err();

        assert!(
            matches!(
                err,
                UringError::OutOfRange {
                    expected_bytes: 6,
                    actual_bytes: 6,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn chunk_ranges_cover_the_range_without_gaps() {
        let pieces: Vec<_> = chunk_ranges(3..20, 8).collect();
        assert_eq!(pieces, vec![3..11, 11..19, 19..20]);
        assert_eq!(chunk_ranges(5..5, 8).count(), 0);
    }
}
