//! AggregateExec → GpuPartialAggregateExec (the partial half on the device, the stock
//! final merge above it; ADR-0007).
//!
//! DataFusion splits a grouped aggregate into a partial aggregate per input partition and
//! a final one that merges their states. The partial half is the one that reads every
//! row, so that is the one replaced: a per-batch map that keeps its input's partitioning
//! and emits exactly the state columns the stock final aggregate expects. A single-mode
//! aggregate (one node doing both halves) is split into the device partial and a stock
//! final. Keys: none, or any columns the Arrow row format orders (see the operator's
//! docs for how they reach the device); values: SUM / COUNT / MIN / MAX / AVG over
//! integers, Float64, Decimal128 and (MIN/MAX) Date32; COUNT(*) too. An argument that is
//! an expression (`SUM(price * (1 - discount))`) is computed by a stock projection below
//! the device operator, on the CPU and visible in EXPLAIN, until the device evaluates
//! expressions itself.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use oxidelake_compute::GpuPartialAggregateExec;
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    let agg = node.downcast_ref::<AggregateExec>()?;
    Some(match agg.mode() {
        AggregateMode::Partial => match device_partial(agg, backend) {
            Ok(plan) => Placement::Rewrite(plan),
            Err(reason) => Placement::Cpu(reason),
        },
        // Merges partial states into partial states: nothing left for the device.
        AggregateMode::PartialReduce => return None,
        // The final merge stays on the CPU; it has something to say only when the
        // partial below it did not go to the device.
        AggregateMode::Final | AggregateMode::FinalPartitioned => match below(agg.input()) {
            Below::Device => return None,
            // After placement a stock partial here is one the device refused, and its
            // reason is the final's. (A placeable one means placement did not run, and
            // the partial node carries that annotation.)
            Below::Stock(partial) => match device_partial(partial, backend) {
                Err(reason) => Placement::Cpu(reason),
                Ok(_) => return None,
            },
            Below::Other => Placement::Cpu("final aggregate without its partial".into()),
        },
        AggregateMode::Single | AggregateMode::SinglePartitioned => {
            match split_single(agg, backend) {
                Ok(plan) => Placement::Rewrite(plan),
                Err(reason) => Placement::Cpu(reason),
            }
        }
    })
}

/// Whether a final aggregate's input is a GpuPartialAggregateExec (through the
/// repartitions, coalesces and partial reduces between them).
pub(crate) fn fed_by_device_partial(input: &Arc<dyn ExecutionPlan>) -> bool {
    matches!(below(input), Below::Device)
}

/// What feeds a final aggregate, through repartitions, coalesces and partial reduces.
enum Below<'a> {
    Device,
    Stock(&'a AggregateExec),
    Other,
}

fn below(plan: &Arc<dyn ExecutionPlan>) -> Below<'_> {
    let mut node = plan;
    loop {
        if node.is::<GpuPartialAggregateExec>() {
            return Below::Device;
        }
        if let Some(agg) = node.downcast_ref::<AggregateExec>() {
            match agg.mode() {
                AggregateMode::Partial => return Below::Stock(agg),
                AggregateMode::PartialReduce => {}
                _ => return Below::Other,
            }
        } else if !(node.is::<RepartitionExec>() || node.is::<CoalescePartitionsExec>()) {
            return Below::Other;
        }
        match node.children().first() {
            Some(child) => node = child,
            None => return Below::Other,
        }
    }
}

/// The device partial aggregate replacing `partial`, or why not.
fn device_partial(
    partial: &AggregateExec,
    backend: BackendKind,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    let gpu = GpuPartialAggregateExec::try_replacing(partial, backend).map_err(reason_of)?;
    Ok(Arc::new(gpu))
}

/// A single-mode aggregate as the device partial plus a stock final (DataFusion builds
/// partial/final pairs and combines them into single mode only after placement, so this
/// is for plans that arrive already combined).
fn split_single(
    agg: &AggregateExec,
    backend: BackendKind,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    let partial = AggregateExec::try_new(
        AggregateMode::Partial,
        agg.group_expr().clone(),
        agg.aggr_expr().to_vec(),
        agg.filter_expr().to_vec(),
        Arc::clone(agg.input()),
        agg.input_schema(),
    )
    .map_err(reason_of)?;
    let gpu = device_partial(&partial, backend)?;
    let mode = match agg.mode() {
        AggregateMode::SinglePartitioned => AggregateMode::FinalPartitioned,
        _ => AggregateMode::Final,
    };
    let last = AggregateExec::try_new(
        mode,
        agg.group_expr().as_final(),
        agg.aggr_expr().to_vec(),
        agg.filter_expr().to_vec(),
        gpu,
        agg.input_schema(),
    )
    .map_err(reason_of)?;
    if last.schema() != agg.schema() {
        return Err("split aggregate changes the output schema".into());
    }
    Ok(Arc::new(last))
}
