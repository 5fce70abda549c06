//! `HardwarePlacementRule`: rewrites eligible nodes into the GPU operators.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_plan::ExecutionPlan;

use crate::eligibility::{Placement, place, place_on_cpu};
use crate::{BackendProbe, OxideOptions};

/// Replaces FilterExec, HashJoinExec, AggregateExec (final with its partial, or single)
/// and vector-distance projections that fit the GPU operators' coverage with `Gpu*Exec`
/// nodes placed for the session's `oxidelake.placement.target`. Everything else is left
/// exactly as DataFusion planned it. With target `cpu` (or `auto` on a GPU-less
/// machine) the rule changes nothing, except for the operator kinds
/// `oxidelake.placement.cpu_operators` names, which become the same operators placed
/// for the CPU (their CPU paths).
#[derive(Debug, Clone)]
pub struct HardwarePlacementRule {
    probe: Arc<dyn BackendProbe>,
}

impl HardwarePlacementRule {
    /// A rule that resolves `auto` with `probe`.
    pub fn new(probe: Arc<dyn BackendProbe>) -> Self {
        Self { probe }
    }

    /// The name DataFusion lists the rule under.
    pub const NAME: &'static str = "hardware_placement";
}

impl PhysicalOptimizerRule for HardwarePlacementRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = OxideOptions::from_config(config);
        let Some(backend) = self.probe.resolve(options.placement_target) else {
            // Placed for the CPU: DataFusion's operators, but for the kinds whose CPU
            // paths the session asks for.
            let kinds = options.cpu_operators;
            if kinds.is_empty() {
                return Ok(plan);
            }
            return plan
                .transform_up(|node| match place_on_cpu(&node, kinds) {
                    Some(Placement::Rewrite(ours)) => Ok(Transformed::yes(ours)),
                    _ => Ok(Transformed::no(node)),
                })
                .data();
        };
        plan.transform_up(|node| match place(&node, backend) {
            Some(Placement::Rewrite(gpu)) => Ok(Transformed::yes(gpu)),
            _ => Ok(Transformed::no(node)),
        })
        .data()
    }

    fn name(&self) -> &str {
        Self::NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// DataFusion's physical optimizer rules with the placement rule inserted before
/// `EnsureRequirements`, so the distribution and ordering the GPU operators need (or no
/// longer need) are enforced around them by DataFusion itself. `rule` is the
/// [`HardwarePlacementRule`], or a wrapper of it (the sqllogictest run counts the plans
/// it rewrites through one).
pub fn physical_optimizer_rules(
    rule: impl PhysicalOptimizerRule + Send + Sync + 'static,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    let at = rules
        .iter()
        .position(|r| r.name() == "EnsureRequirements")
        .unwrap_or(rules.len());
    rules.insert(at, Arc::new(rule));
    rules
}

/// [`physical_optimizer_rules`] for an embedded session: also the
/// [`GraceJoinRule`](crate::GraceJoinRule), just before the placement rule, so that under
/// `oxidelake.memory.spill_joins` the partitioned hash joins spill instead of failing,
/// and the [`JoinFilterRowsRule`](crate::JoinFilterRowsRule) last, once DataFusion has
/// pushed the joins' dynamic filters into the scans, then the
/// [`DeviceTransitionRule`](crate::DeviceTransitionRule), after every rule that could come
/// between a transition and the operator it feeds.
pub fn embedded_optimizer_rules(
    rule: impl PhysicalOptimizerRule + Send + Sync + 'static,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = physical_optimizer_rules(rule);
    let at = rules
        .iter()
        .position(|r| r.name() == HardwarePlacementRule::NAME)
        .unwrap_or(rules.len());
    rules.insert(at, Arc::new(crate::GraceJoinRule));
    rules.push(Arc::new(crate::JoinFilterRowsRule));
    rules.push(Arc::new(crate::DeviceTransitionRule));
    rules
}
