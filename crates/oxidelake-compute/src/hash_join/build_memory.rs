//! The build side in the query's memory pool, as DataFusion's `HashJoinExec` holds its
//! own: each collected batch is reserved before it is kept, so a build side beyond the
//! session's memory limit fails with `ResourcesExhausted` (naming this operator) instead
//! of growing past the limit unseen; the reservation then follows the concatenated
//! batch and the table, and is released when the build side is dropped.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use datafusion::common::utils::memory::RecordBatchMemoryCounter;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::ExecutionPlan;
use futures::TryStreamExt;

/// A reservation for the build side of `partition` (`None`: the shared CollectLeft one).
pub(super) fn reservation(context: &TaskContext, partition: Option<usize>) -> MemoryReservation {
    let name = match partition {
        Some(p) => format!("GpuHashJoinExec[{p}]"),
        None => "GpuHashJoinExec(shared build)".to_string(),
    };
    MemoryConsumer::new(name).register(context.memory_pool())
}

/// Every batch of `input`'s `partitions` (collected concurrently), each reserved in
/// `reservation` before it is kept, as DataFusion's join reserves them: each allocation
/// once ([`RecordBatchMemoryCounter`]). Batches can share their allocations: those read
/// back from a spill file (a grace join's pair) point into the chunk the reader decoded,
/// so `get_array_memory_size` would count that chunk once per buffer of every batch, and
/// a pair's few hundred KiB as tens of MiB (issue 44, item 8).
pub(super) async fn collect_reserved(
    input: &Arc<dyn ExecutionPlan>,
    partitions: impl IntoIterator<Item = usize>,
    context: &Arc<TaskContext>,
    reservation: &MemoryReservation,
) -> Result<Vec<RecordBatch>> {
    let streams = partitions
        .into_iter()
        .map(|p| input.execute(p, Arc::clone(context)))
        .collect::<Result<Vec<_>>>()?;
    let parts = futures::future::try_join_all(streams.into_iter().map(|mut stream| async move {
        let mut batches = Vec::new();
        let mut counter = RecordBatchMemoryCounter::new();
        while let Some(batch) = stream.try_next().await? {
            reservation.try_grow(counter.count_batch(&batch))?;
            batches.push(batch);
        }
        Ok::<_, DataFusionError>(batches)
    }))
    .await?;
    Ok(parts.into_iter().flatten().collect())
}
