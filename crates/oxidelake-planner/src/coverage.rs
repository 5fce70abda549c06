//! How much of a placed plan runs on GPU operators: filters, joins, aggregates and
//! computed projections placed versus present, and why each one that stayed on the CPU did.
//!
//! The counts read the plan *after* the placement rule: a `Gpu*Exec` is a placed
//! operator, a stock filter, join or aggregate is one that stayed. An aggregate is counted
//! once, at its final (or single) node: placed when its partial half is a
//! GpuPartialAggregateExec (the device reduced the rows; the stock final
//! merges the per-batch states). The reasons are the ones EXPLAIN prints.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, SortMergeJoinExec, SymmetricHashJoinExec,
};
use datafusion::physical_plan::projection::ProjectionExec;
use oxidelake_compute::{GpuFilterExec, GpuHashJoinExec, GpuProjectionExec, GraceHashJoinExec};
use oxidelake_core::BackendKind;

use crate::eligibility::{computes, cpu_reason, fed_by_device_partial};

/// The operator families coverage is counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OperatorFamily {
    /// FilterExec / GpuFilterExec.
    Filter,
    /// Hash (also spilling), sort-merge, nested-loop and cross joins / GpuHashJoinExec.
    Join,
    /// AggregateExec (final or single), placed when it is a final over a
    /// GpuPartialAggregateExec.
    Aggregate,
    /// A ProjectionExec that computes an expression / GpuProjectionExec (projections
    /// of columns only have nothing to place and are not counted).
    Projection,
}

impl OperatorFamily {
    /// Lower-case plural, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            OperatorFamily::Filter => "filters",
            OperatorFamily::Join => "joins",
            OperatorFamily::Aggregate => "aggregates",
            OperatorFamily::Projection => "computed projections",
        }
    }
}

/// Placed and total operators of one plan (or a sum of plans), and the CPU reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementCoverage {
    /// Per family: (placed on a GPU operator, total).
    pub counts: BTreeMap<OperatorFamily, (usize, usize)>,
    /// Per family and reason: how many operators stayed on the CPU for it.
    pub reasons: BTreeMap<(OperatorFamily, String), usize>,
}

impl PlacementCoverage {
    /// Counts the operators of `plan`, placed for `backend`.
    pub fn of(plan: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Self {
        let mut coverage = PlacementCoverage::default();
        // `apply` visits every node; the closure cannot fail.
        let _ = plan.apply(|node| {
            if let Some((family, placed)) = classify(node) {
                let entry = coverage.counts.entry(family).or_default();
                entry.1 += 1;
                if placed {
                    entry.0 += 1;
                } else {
                    let reason = cpu_reason(node, backend)
                        .unwrap_or_else(|| "not a candidate for a GPU operator".into());
                    *coverage.reasons.entry((family, reason)).or_default() += 1;
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
        coverage
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &PlacementCoverage) {
        for (family, (placed, total)) in &other.counts {
            let entry = self.counts.entry(*family).or_default();
            entry.0 += placed;
            entry.1 += total;
        }
        for (key, n) in &other.reasons {
            *self.reasons.entry(key.clone()).or_default() += n;
        }
    }

    /// (placed, total) for `family`.
    pub fn get(&self, family: OperatorFamily) -> (usize, usize) {
        self.counts.get(&family).copied().unwrap_or_default()
    }

    /// `placed/total` for every family, e.g. `filters 3/4, joins 2/2, aggregates 0/1,
    /// computed projections 1/1`.
    pub fn summary(&self) -> String {
        [
            OperatorFamily::Filter,
            OperatorFamily::Join,
            OperatorFamily::Aggregate,
            OperatorFamily::Projection,
        ]
        .iter()
        .map(|f| {
            let (placed, total) = self.get(*f);
            format!("{} {placed}/{total}", f.name())
        })
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// The family of `node` and whether it is a GPU operator; `None` for other nodes and
/// for partial aggregates (counted with their final).
fn classify(node: &Arc<dyn ExecutionPlan>) -> Option<(OperatorFamily, bool)> {
    if node.is::<GpuFilterExec>() {
        return Some((OperatorFamily::Filter, true));
    }
    if node.is::<FilterExec>() {
        return Some((OperatorFamily::Filter, false));
    }
    if node.is::<GpuHashJoinExec>() {
        return Some((OperatorFamily::Join, true));
    }
    if let Some(grace) = node.downcast_ref::<GraceHashJoinExec>() {
        // Placed when its pairs are joined on a device.
        return Some((OperatorFamily::Join, grace.pairs().is_some()));
    }
    if node.is::<HashJoinExec>()
        || node.is::<SortMergeJoinExec>()
        || node.is::<NestedLoopJoinExec>()
        || node.is::<CrossJoinExec>()
        || node.is::<SymmetricHashJoinExec>()
    {
        return Some((OperatorFamily::Join, false));
    }
    if let Some(p) = node.downcast_ref::<GpuProjectionExec>() {
        // One that only repeats a constant for the filter above computes nothing.
        return p
            .computes_on_device()
            .then_some((OperatorFamily::Projection, true));
    }
    if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
        return computes(projection).then_some((OperatorFamily::Projection, false));
    }
    if let Some(agg) = node.downcast_ref::<AggregateExec>() {
        let partial = matches!(
            agg.mode(),
            AggregateMode::Partial | AggregateMode::PartialReduce
        );
        let device_partial = matches!(
            agg.mode(),
            AggregateMode::Final | AggregateMode::FinalPartitioned
        ) && fed_by_device_partial(agg.input());
        return (!partial).then_some((OperatorFamily::Aggregate, device_partial));
    }
    None
}
