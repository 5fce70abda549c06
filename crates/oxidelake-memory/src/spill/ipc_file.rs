//! Encoding and decoding of one spill file: a single batch in the Arrow IPC file format.
//!
//! Buffers are written 64-byte aligned and uncompressed, so reading a spill file back is
//! a copy of raw Arrow buffers with no decode step. A CRC-32 of the whole file is kept in
//! memory by the manager and checked before the bytes reach the IPC decoder: a truncated
//! or overwritten file is rejected as a format error instead of being decoded into wrong
//! values (or tripping the decoder).

use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::MemoryError;

/// What the manager remembers about a written spill file, to verify it on read.
#[derive(Debug, Clone)]
pub(crate) struct SpillFileInfo {
    pub(crate) file_bytes: u64,
    pub(crate) crc32: u32,
    pub(crate) rows: usize,
    pub(crate) schema: SchemaRef,
}

/// Encodes `batch` as an Arrow IPC file with 64-byte-aligned buffers.
pub(crate) fn encode(
    batch: &RecordBatch,
    path: &str,
) -> Result<(Vec<u8>, SpillFileInfo), MemoryError> {
    let fail = |e: arrow::error::ArrowError| MemoryError::SpillFormat {
        path: path.to_string(),
        detail: "encoding the batch as Arrow IPC failed".into(),
        source: Some(Box::new(e)),
    };
    let bytes =
        crate::ipc::encode_file(&batch.schema(), std::slice::from_ref(batch)).map_err(fail)?;
    let info = SpillFileInfo {
        file_bytes: bytes.len() as u64,
        crc32: crc32fast::hash(&bytes),
        rows: batch.num_rows(),
        schema: batch.schema(),
    };
    Ok((bytes, info))
}

/// Decodes a spill file after checking it is exactly the file that was written.
pub(crate) fn decode(
    bytes: Buffer,
    info: &SpillFileInfo,
    path: &str,
) -> Result<RecordBatch, MemoryError> {
    let format =
        |detail: String, source: Option<oxidelake_core::BoxError>| MemoryError::SpillFormat {
            path: path.to_string(),
            detail,
            source,
        };
    if bytes.len() as u64 != info.file_bytes {
        return Err(format(
            format!(
                "expected {} bytes, found {} (truncated?)",
                info.file_bytes,
                bytes.len()
            ),
            None,
        ));
    }
    let crc = crc32fast::hash(bytes.as_slice());
    if crc != info.crc32 {
        return Err(format(
            format!(
                "checksum mismatch: wrote crc32 {:08x}, read {crc:08x}",
                info.crc32
            ),
            None,
        ));
    }
    let (_, batches) = crate::ipc::decode_file(bytes)
        .map_err(|e| format("not a decodable Arrow IPC file".into(), Some(Box::new(e))))?;
    let [batch] = <[RecordBatch; 1]>::try_from(batches)
        .map_err(|b| format(format!("expected 1 batch, found {}", b.len()), None))?;
    if batch.num_rows() != info.rows || batch.schema() != info.schema {
        return Err(format(
            format!(
                "expected {} rows of the spilled schema, found {} rows",
                info.rows,
                batch.num_rows()
            ),
            None,
        ));
    }
    Ok(batch)
}
