//! `GraceJoinRule`: under a memory limit, partitioned hash joins become
//! `GraceHashJoinExec`, which spills instead of failing.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;
use oxidelake_compute::GraceHashJoinExec;

use crate::OxideOptions;

/// Wraps each Partitioned-mode `HashJoinExec` that [`GraceHashJoinExec::can_wrap`] in a
/// `GraceHashJoinExec` when `oxidelake.memory.spill_joins` is on or
/// `oxidelake.memory.device_limit` is set; changes nothing otherwise. It runs after DataFusion's join selection (which fixes each join's mode
/// and sides) and before the placement rule, which may then have the pairs joined on a
/// device (`GraceHashJoinExec::with_pairs`), their build sides bounded by
/// `oxidelake.memory.device_limit` as well. Embedded sessions only: the cluster codec
/// does not carry the wrapper, and executors own their memory.
#[derive(Debug, Clone, Default)]
pub struct GraceJoinRule;

impl GraceJoinRule {
    /// The name DataFusion lists the rule under.
    pub const NAME: &'static str = "grace_join";
}

impl PhysicalOptimizerRule for GraceJoinRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = OxideOptions::from_config(config);
        // A device limit bounds joins placed on a device through the same splitting, with
        // or without a host limit.
        if !options.spill_joins && options.device_limit.is_none() {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if !GraceHashJoinExec::can_wrap(join) {
                return Ok(Transformed::no(node));
            }
            let join = Arc::new(join.builder().build()?);
            let grace = GraceHashJoinExec::try_new(join)?.with_device_limit(options.device_limit);
            Ok(Transformed::yes(Arc::new(grace) as _))
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
