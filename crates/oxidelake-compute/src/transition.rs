//! Where a plan's data changes device (ADR-0014): `HostToDeviceExec` copies its input's
//! batches to the device once, the GPU operators above it pass [`SegmentBatch`]es to
//! each other, and `DeviceToHostExec` copies them back once, where the next operator runs
//! on the CPU (the segment and its replay on a device failure: [`crate::segment`]).
//!
//! Between the two, batches travel through [`SegmentExec::execute_segment`] rather than
//! `ExecutionPlan::execute`; DataFusion sees ordinary nodes with their input's schema.
//! A `HostToDeviceExec` uploads one batch ahead of its consumer, so a copy overlaps the
//! device work on the batch before it. Each transition stages its copies through a
//! [`StagingPool`] of its own per partition, so a run of similar batches allocates one
//! pinned staging buffer per batch in flight, not one per batch (`staging_allocations`
//! in EXPLAIN ANALYZE). On the CPU backend nothing is copied: the batches stay host
//! batches ([`SegmentBatch::host`]) and each operator runs its host path.
//!
//! Every node's `execute` still returns host batches with the right rows (the
//! `HostToDeviceExec` passes its input through, a GPU operator runs its one batch
//! function over host batches), so a
//! plan that some later rewrite separated from its transitions stays correct, only
//! slower.

mod download;
mod metrics;
pub(crate) mod upload;

pub use download::DeviceToHostExec;
pub use upload::HostToDeviceExec;
