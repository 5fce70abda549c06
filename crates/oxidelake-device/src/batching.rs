//! How large a batch a device wants: operators gather their input to `batch_rows`
//! before it crosses to a GPU backend.
//!
//! DataFusion hands operators 8,192-row batches. A GPU pays a fixed cost per transfer
//! and per launch, so a device backend asks for batches of about a million rows (one
//! copy each way a batch, ADR-0015). The CPU backend asks for nothing: it works on
//! whatever arrives.
//!
//! A batch is also bounded in bytes (`batch_bytes`): a million rows of 1,024-float
//! vectors would be 4 GiB of host memory before the device saw any of it.
//!
//! Set per process (each executor knows its own device), from the environment:
//! `OXIDE_CUDA_BATCH_ROWS` and `OXIDE_CUDA_BATCH_BYTES`.

use oxidelake_core::EngineError;

/// A device's batch sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSizes {
    /// Rows an operator gathers before one device call (the last batch may be smaller).
    pub batch_rows: usize,
    /// Most bytes (Arrow memory of the input) a gathered batch holds; fewer rows than
    /// `batch_rows` when the rows are wide.
    pub batch_bytes: usize,
}

/// The default batch: 1 Mi rows (8 MiB per 8-byte column), large enough that a PCIe copy
/// runs near its bandwidth and a launch's fixed cost disappears.
pub const DEFAULT_BATCH_ROWS: usize = 1 << 20;
/// The default byte bound of a gathered batch: 256 MiB.
pub const DEFAULT_BATCH_BYTES: usize = 256 << 20;

impl Default for BatchSizes {
    fn default() -> Self {
        Self {
            batch_rows: DEFAULT_BATCH_ROWS,
            batch_bytes: DEFAULT_BATCH_BYTES,
        }
    }
}

impl BatchSizes {
    /// Batches of `batch_rows` rows (at least 8), bounded by the default byte size.
    pub fn new(batch_rows: usize) -> Result<Self, EngineError> {
        if batch_rows < 8 {
            return Err(EngineError::InvalidArgument {
                what: "device batch rows",
                detail: format!("{batch_rows}: a device batch holds at least 8 rows"),
            });
        }
        Ok(Self {
            batch_rows,
            batch_bytes: DEFAULT_BATCH_BYTES,
        })
    }

    /// The same sizes with gathered batches bounded to `bytes` (at least one row each).
    pub fn with_batch_bytes(mut self, bytes: usize) -> Self {
        self.batch_bytes = bytes.max(1);
        self
    }

    /// The sizes from `OXIDE_CUDA_BATCH_ROWS` / `OXIDE_CUDA_BATCH_BYTES`, defaults for
    /// those unset; an unparsable or too small value is an error naming it.
    pub fn from_env() -> Result<Self, EngineError> {
        let read = |name| env_count(name, "device batching");
        let batch_rows = read("OXIDE_CUDA_BATCH_ROWS")?.unwrap_or(DEFAULT_BATCH_ROWS);
        let batch_bytes = read("OXIDE_CUDA_BATCH_BYTES")?.unwrap_or(DEFAULT_BATCH_BYTES);
        Ok(Self::new(batch_rows)?.with_batch_bytes(batch_bytes))
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
    fn the_default_batch_is_a_million_rows_within_256_mib() {
        let b = BatchSizes::default();
        assert_eq!((b.batch_rows, b.batch_bytes), (1 << 20, 256 << 20));
        assert_eq!(BatchSizes::new(b.batch_rows).unwrap(), b);
    }

    #[test]
    fn batches_under_eight_rows_are_refused() {
        assert!(BatchSizes::new(7).is_err());
        assert!(BatchSizes::new(0).is_err());
        assert!(BatchSizes::new(8).is_ok());
    }
}
