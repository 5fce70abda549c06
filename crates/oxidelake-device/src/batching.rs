//! How large a batch a device wants: operators coalesce their input to `batch_rows`
//! before handing it to a GPU backend, and the backend cuts it into `chunk_rows` chunks
//! that alternate between its two pipeline streams.
//!
//! DataFusion hands operators 8,192-row batches. A GPU pays a fixed cost per transfer
//! and per launch, and the two-stream pipeline only overlaps copies with kernels when a
//! batch holds more than one chunk, so a device backend asks for several chunks per
//! batch. The CPU backend asks for nothing: it works on whatever arrives.
//!
//! A batch is also bounded in bytes (`batch_bytes`): a million rows of 1,024-float
//! vectors would be 4 GiB of host memory before the device saw any of it.
//!
//! Set per process (each executor knows its own device), from the environment:
//! `OXIDE_CUDA_BATCH_ROWS`, `OXIDE_CUDA_CHUNK_ROWS` and `OXIDE_CUDA_BATCH_BYTES`.

use oxidelake_core::EngineError;

/// A device's batch and chunk sizes, in rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSizes {
    /// Rows an operator gathers before one device call (the last batch may be smaller).
    pub batch_rows: usize,
    /// Rows per pipeline chunk; a multiple of 8, so a chunk's validity starts on a byte.
    pub chunk_rows: usize,
    /// Most bytes (Arrow memory of the input) a gathered batch holds; fewer rows than
    /// `batch_rows` when the rows are wide.
    pub batch_bytes: usize,
}

/// The default chunk: 256 Ki rows (2 MiB per 8-byte column), large enough that a PCIe
/// copy runs near its bandwidth, small enough that two lanes' staging stays modest.
pub const DEFAULT_CHUNK_ROWS: usize = 1 << 18;
/// The default batch: four chunks, two per stream.
pub const DEFAULT_BATCH_ROWS: usize = 4 * DEFAULT_CHUNK_ROWS;
/// The default byte bound of a gathered batch: 256 MiB.
pub const DEFAULT_BATCH_BYTES: usize = 256 << 20;

impl Default for BatchSizes {
    fn default() -> Self {
        Self {
            batch_rows: DEFAULT_BATCH_ROWS,
            chunk_rows: DEFAULT_CHUNK_ROWS,
            batch_bytes: DEFAULT_BATCH_BYTES,
        }
    }
}

impl BatchSizes {
    /// Sizes checked: both at least 8, the chunk a multiple of 8, the batch at least one
    /// chunk.
    pub fn new(batch_rows: usize, chunk_rows: usize) -> Result<Self, EngineError> {
        if chunk_rows < 8 || !chunk_rows.is_multiple_of(8) {
            return Err(EngineError::InvalidArgument {
                what: "device chunk rows",
                detail: format!("{chunk_rows}: it must be a positive multiple of 8"),
            });
        }
        if batch_rows < chunk_rows {
            return Err(EngineError::InvalidArgument {
                what: "device batch rows",
                detail: format!("{batch_rows} is smaller than the chunk of {chunk_rows}"),
            });
        }
        Ok(Self {
            batch_rows,
            chunk_rows,
            batch_bytes: DEFAULT_BATCH_BYTES,
        })
    }

    /// The same sizes with gathered batches bounded to `bytes` (at least one row each).
    pub fn with_batch_bytes(mut self, bytes: usize) -> Self {
        self.batch_bytes = bytes.max(1);
        self
    }

    /// The sizes from `OXIDE_CUDA_BATCH_ROWS` / `OXIDE_CUDA_CHUNK_ROWS` /
    /// `OXIDE_CUDA_BATCH_BYTES`, defaults for those unset; an unparsable or inconsistent
    /// value is an error naming it.
    pub fn from_env() -> Result<Self, EngineError> {
        let read = |name| env_count(name, "device batching");
        let chunk_rows = read("OXIDE_CUDA_CHUNK_ROWS")?.unwrap_or(DEFAULT_CHUNK_ROWS);
        let batch_rows = read("OXIDE_CUDA_BATCH_ROWS")?.unwrap_or(chunk_rows.saturating_mul(4));
        let batch_bytes = read("OXIDE_CUDA_BATCH_BYTES")?.unwrap_or(DEFAULT_BATCH_BYTES);
        Ok(Self::new(batch_rows, chunk_rows)?.with_batch_bytes(batch_bytes))
    }
}

/// The count in environment variable `name` (`None` when unset); a value that is not a
/// non-negative integer is an `InvalidArgument` about `what`, naming the variable.
pub(crate) fn env_count(name: &str, what: &'static str) -> Result<Option<usize>, EngineError> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| EngineError::InvalidArgument {
                what,
                detail: format!("{name}={text:?} is not a whole number"),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_batch_holds_two_chunks_per_stream() {
        let b = BatchSizes::default();
        assert_eq!(b.batch_rows, 4 * b.chunk_rows);
        assert_eq!(BatchSizes::new(b.batch_rows, b.chunk_rows).unwrap(), b);
    }

    #[test]
    fn chunks_that_are_not_multiples_of_eight_or_exceed_the_batch_are_refused() {
        assert!(BatchSizes::new(1024, 100).is_err());
        assert!(BatchSizes::new(1024, 0).is_err());
        assert!(BatchSizes::new(512, 1024).is_err());
        assert!(BatchSizes::new(4096, 1024).is_ok());
    }
}
