//! The stream of record batches that operators exchange.

/// A pinned, sendable stream of Arrow record batches with a known schema.
///
/// This is DataFusion's `SendableRecordBatchStream`, named once here so that the
/// engine's crates agree on the exact type without each importing it from DataFusion:
/// in embedded mode operators hand each other `RecordBatch`es through these streams with
/// no serialization at all.
pub type BatchStream = datafusion::execution::SendableRecordBatchStream;
