//! Arrow IPC files for zero-decode data (spill files and the storage layer's hot cache).
//!
//! Files are written with 64-byte buffer alignment and no compression, so every column
//! buffer sits at a 64-byte offset inside the file. Reading one back copies the file once
//! into a 64-byte-aligned [`Buffer`] (or not at all when the bytes already are) and hands
//! out record batches whose column buffers are slices of that one allocation: no
//! per-value decode, no per-column copy.

use std::sync::Arc;

use arrow::buffer::{Buffer, MutableBuffer};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::MetadataVersion;
use arrow::ipc::convert::fb_to_schema;
use arrow::ipc::reader::{FileDecoder, read_footer_length};
use arrow::ipc::root_as_footer;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::record_batch::RecordBatch;
use oxidelake_core::HOST_ALIGN_BYTES;

/// Length of the IPC file trailer: the footer length (4 bytes) and the magic (6 bytes).
const TRAILER_BYTES: usize = 10;

/// 64-byte alignment, no compression, metadata V5.
pub fn write_options() -> Result<IpcWriteOptions, ArrowError> {
    IpcWriteOptions::try_new(HOST_ALIGN_BYTES, false, MetadataVersion::V5)
}

/// Encodes `batches` (all of `schema`) as one Arrow IPC file.
pub fn encode_file(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>, ArrowError> {
    let mut bytes = Vec::new();
    {
        let mut writer = FileWriter::try_new_with_options(&mut bytes, schema, write_options()?)?;
        for batch in batches {
            writer.write(batch)?;
        }
        writer.finish()?;
    }
    Ok(bytes)
}

/// `bytes` in a buffer starting on a 64-byte boundary: the input itself when it already
/// does, else one copy.
pub fn aligned_buffer(bytes: impl Into<Buffer>) -> Buffer {
    let buffer: Buffer = bytes.into();
    if (buffer.as_ptr() as usize).is_multiple_of(HOST_ALIGN_BYTES) {
        return buffer;
    }
    let mut copy = MutableBuffer::with_capacity(buffer.len());
    copy.extend_from_slice(buffer.as_slice());
    copy.into()
}

fn invalid(detail: impl Into<String>) -> ArrowError {
    ArrowError::IpcError(detail.into())
}

/// Decodes an Arrow IPC file without copying its column buffers: the returned batches
/// share `file` (after [`aligned_buffer`], if it was not 64-byte aligned). Errors on
/// anything that is not a complete IPC file, never panics.
pub fn decode_file(file: impl Into<Buffer>) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let file = aligned_buffer(file);
    let len = file.len();
    if len < TRAILER_BYTES + 8 {
        return Err(invalid(format!(
            "{len} bytes is too short for an Arrow IPC file"
        )));
    }
    let trailer: [u8; TRAILER_BYTES] = file[len - TRAILER_BYTES..]
        .try_into()
        .map_err(|_| invalid("unreadable IPC trailer"))?;
    let footer_len = read_footer_length(trailer)?;
    let footer_start = (len - TRAILER_BYTES)
        .checked_sub(footer_len)
        .ok_or_else(|| invalid(format!("footer of {footer_len} bytes exceeds the file")))?;
    let footer = root_as_footer(&file[footer_start..len - TRAILER_BYTES])
        .map_err(|e| invalid(format!("unreadable IPC footer: {e}")))?;
    let schema: SchemaRef = Arc::new(fb_to_schema(
        footer
            .schema()
            .ok_or_else(|| invalid("IPC footer has no schema"))?,
    ));
    let mut decoder =
        FileDecoder::new(Arc::clone(&schema), footer.version()).with_require_alignment(false);
    let block_bytes = |block: &arrow::ipc::Block| -> Result<Buffer, ArrowError> {
        let start = usize::try_from(block.offset()).map_err(|_| invalid("negative offset"))?;
        let size = usize::try_from(block.metaDataLength())
            .ok()
            .zip(usize::try_from(block.bodyLength()).ok())
            .map(|(m, b)| m + b)
            .ok_or_else(|| invalid("negative block length"))?;
        if start.checked_add(size).is_none_or(|end| end > footer_start) {
            return Err(invalid(format!(
                "block at {start}+{size} runs past the data section"
            )));
        }
        Ok(file.slice_with_length(start, size))
    };
    for block in footer.dictionaries().iter().flatten() {
        decoder.read_dictionary(block, &block_bytes(block)?)?;
    }
    let mut batches = Vec::new();
    for block in footer.recordBatches().iter().flatten() {
        if let Some(batch) = decoder.read_record_batch(block, &block_bytes(block)?)? {
            batches.push(batch);
        }
    }
    Ok((schema, batches))
}

/// Whether every buffer of every column of `batch` starts on a 64-byte boundary.
pub fn buffers_are_64_byte_aligned(batch: &RecordBatch) -> bool {
    fn data_aligned(data: &arrow::array::ArrayData) -> bool {
        data.buffers()
            .iter()
            .all(|b| (b.as_ptr() as usize).is_multiple_of(HOST_ALIGN_BYTES))
            && data
                .nulls()
                .is_none_or(|n| (n.buffer().as_ptr() as usize).is_multiple_of(HOST_ALIGN_BYTES))
            && data.child_data().iter().all(data_aligned)
    }
    batch.columns().iter().all(|c| data_aligned(&c.to_data()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn batches() -> (SchemaRef, Vec<RecordBatch>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("x", DataType::Float64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = |offset: i64| {
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(vec![Some(offset), None, Some(offset + 2)])),
                    Arc::new(Float64Array::from(vec![0.5, 1.5, f64::NAN])),
                    Arc::new(StringArray::from(vec![Some("a"), Some("bb"), None])),
                ],
            )
            .unwrap()
        };
        (Arc::clone(&schema), vec![batch(0), batch(10)])
    }

    #[test]
    fn decoded_batches_equal_the_written_ones_and_share_one_aligned_allocation() {
        let (schema, written) = batches();
        let bytes = encode_file(&schema, &written).unwrap();
        let (read_schema, read) = decode_file(bytes.clone()).unwrap();
        assert_eq!(read_schema, schema);
        assert_eq!(read, written);
        assert!(read.iter().all(buffers_are_64_byte_aligned));
        // Re-encoding what was read gives the same bytes.
        assert_eq!(encode_file(&schema, &read).unwrap(), bytes);
    }

    #[test]
    fn a_misaligned_input_is_realigned_once() {
        let (schema, written) = batches();
        let bytes = encode_file(&schema, &written).unwrap();
        let mut shifted = MutableBuffer::with_capacity(bytes.len() + 1);
        shifted.extend_from_slice(&[0u8]);
        shifted.extend_from_slice(&bytes);
        let shifted: Buffer = shifted.into();
        let misaligned = shifted.slice(1);
        assert!(!(misaligned.as_ptr() as usize).is_multiple_of(HOST_ALIGN_BYTES));
        let (_, read) = decode_file(misaligned).unwrap();
        assert_eq!(read, written);
        assert!(read.iter().all(buffers_are_64_byte_aligned));
    }

    #[test]
    fn truncated_or_foreign_bytes_are_errors_not_panics() {
        let (schema, written) = batches();
        let bytes = encode_file(&schema, &written).unwrap();
        for cut in [0, 5, 17, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode_file(bytes[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        assert!(decode_file(b"PAR1 definitely not arrow PAR1".to_vec()).is_err());
    }
}
