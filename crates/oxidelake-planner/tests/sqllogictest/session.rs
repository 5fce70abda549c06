//! The placed session: the `TestContext`'s own session with the placement rule added,
//! and a counter of the plans the rule put a GPU operator into.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::common::tree_node::TreeNode;
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::session_state::SessionState;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use oxidelake_core::BackendKind;
use oxidelake_planner::{
    FixedProbe, HardwarePlacementRule, OxideOptions, PlacementTarget, physical_optimizer_rules,
};

/// The placement rule, counting the plans that leave it with a `Gpu*` operator.
#[derive(Debug)]
pub struct CountingPlacement {
    rule: HardwarePlacementRule,
    placed: Arc<AtomicUsize>,
}

impl PhysicalOptimizerRule for CountingPlacement {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self.rule.optimize(plan, config)?;
        if plan.exists(|node| Ok(node.name().starts_with("Gpu")))? {
            self.placed.fetch_add(1, Ordering::Relaxed);
        }
        Ok(plan)
    }

    fn name(&self) -> &str {
        self.rule.name()
    }

    fn schema_check(&self) -> bool {
        self.rule.schema_check()
    }
}

/// Adds the placement rule (placing for cuda, with a detector that finds no GPU, as on
/// this machine) to `ctx`'s session, keeping everything the `TestContext` registered.
/// Returns the counter of placed plans.
pub fn place_for_cuda(ctx: &SessionContext) -> Arc<AtomicUsize> {
    let placed = Arc::new(AtomicUsize::new(0));
    let rule = CountingPlacement {
        rule: HardwarePlacementRule::new(Arc::new(FixedProbe(BackendKind::CpuSimd))),
        placed: Arc::clone(&placed),
    };
    let original = ctx.state();
    let mut state = SessionStateBuilder::new_from_existing(original.clone())
        .with_physical_optimizer_rules(physical_optimizer_rules(rule))
        .build();
    restore_function_names(&original, &mut state);
    state
        .config_mut()
        .options_mut()
        .extensions
        .insert(OxideOptions {
            placement_target: PlacementTarget::Cuda,
            ..OxideOptions::default()
        });
    *ctx.state_ref().write() = state;
    placed
}

/// Rebuilding a session registers its functions again, each under its name and aliases,
/// in hash-map order: a function that overrides another's alias (the Spark
/// `array_contains` over DataFusion's `array_has` alias) can lose its name. Registers
/// each function whose name now resolves to another one again, so every name means what
/// it meant in the stock session.
fn restore_function_names(original: &SessionState, state: &mut SessionState) {
    for udf in moved(original.scalar_functions(), state.scalar_functions(), |f| {
        f.name()
    }) {
        let _ = state.register_udf(udf);
    }
    for udaf in moved(
        original.aggregate_functions(),
        state.aggregate_functions(),
        |f| f.name(),
    ) {
        let _ = state.register_udaf(udaf);
    }
    for udwf in moved(original.window_functions(), state.window_functions(), |f| {
        f.name()
    }) {
        let _ = state.register_udwf(udwf);
    }
}

/// The functions of `original` registered under their own name there whose name `now`
/// resolves to another function.
fn moved<F: ?Sized>(
    original: &HashMap<String, Arc<F>>,
    now: &HashMap<String, Arc<F>>,
    name: impl Fn(&F) -> &str,
) -> Vec<Arc<F>> {
    original
        .iter()
        .filter(|(key, f)| {
            name(f) == key.as_str() && now.get(*key).is_some_and(|n| !Arc::ptr_eq(n, *f))
        })
        .map(|(_, f)| Arc::clone(f))
        .collect()
}
