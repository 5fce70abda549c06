//! [`SignedZeroInListRule`]: a float `IN` list that holds one zero holds the other too,
//! so that `x IN (list)` means `x = a OR x = b ...` for `-0.0` as for every other value.
//!
//! DataFusion 55.2 compares floats with `-0.0 = 0.0` (its comparison kernels, hashing,
//! grouping and join keys all normalise the sign of zero), and turns an `IN` list of up
//! to three values into such comparisons. A longer list of literals is evaluated by a set
//! of bit patterns instead (`in_list::primitive_filter`'s `OrderedFloat64`, the
//! `BranchlessFilter` and `BitmapFilter`), where `-0.0` and `+0.0` are different: there
//! `-0.0 IN (0.0, 1.0, 2.0, 3.0)` is false though `-0.0 = 0.0` is true
//! (`docs/upstream-defects.md`). The device operators evaluate an `IN` list as its `=`
//! comparisons, so without this rule the answer would also depend on the placement.
//!
//! Adding the missing zero to the list makes bit-pattern membership exactly `=`
//! membership: `-0.0` and `+0.0` are the only distinct bit patterns that `=` holds equal
//! (NaN equals only the same NaN in DataFusion's total order). NULLs, `NOT IN` and every
//! other value keep their meaning. The rule runs after DataFusion's simplifier in every
//! optimizer pass, on the literals it folded, and keeps each rewritten expression's name.

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// A logical optimizer rule (added after DataFusion's own) that gives every float `IN`
/// list of literals holding `+0.0` or `-0.0` the other zero too (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct SignedZeroInListRule;

impl SignedZeroInListRule {
    /// The rule.
    pub fn new() -> Self {
        Self
    }
}

impl OptimizerRule for SignedZeroInListRule {
    fn name(&self) -> &str {
        "oxidelake_signed_zero_in_list"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        // The names the plan's schema was derived from stay as they were.
        let preserver = NamePreserver::new(&plan);
        plan.map_expressions(|expr| {
            // A grouping set cannot be aliased: its members keep their names one by one.
            if let Expr::GroupingSet(_) = &expr {
                expr.map_children(|member| complete(&preserver, member))
            } else {
                complete(&preserver, expr)
            }
        })
    }
}

/// `expr` with every float `IN` list in it completed, under its old name.
fn complete(preserver: &NamePreserver, expr: Expr) -> Result<Transformed<Expr>> {
    if !expr.exists(|e| Ok(missing_zeros(e).is_some()))? {
        return Ok(Transformed::no(expr));
    }
    let name = preserver.save(&expr);
    let completed = expr.transform_up(|e| {
        Ok(match (missing_zeros(&e), e) {
            (Some(missing), Expr::InList(mut in_list)) => {
                in_list.list.extend(missing);
                Transformed::yes(Expr::InList(in_list))
            }
            (_, e) => Transformed::no(e),
        })
    })?;
    Ok(Transformed::yes(name.restore(completed.data)))
}

/// The zeros an `IN` list of `expr` lacks: for each float zero literal in it, the zero
/// of the other sign unless the list holds it already. `None` when nothing is missing
/// (or `expr` is no `IN` list).
fn missing_zeros(expr: &Expr) -> Option<Vec<Expr>> {
    let Expr::InList(InList { list, .. }) = expr else {
        return None;
    };
    let mut missing: Vec<Expr> = Vec::new();
    for twin in list.iter().filter_map(other_zero) {
        // `Expr` equality compares float literals by their bits: `0.0 != -0.0` here.
        if !list.contains(&twin) && !missing.contains(&twin) {
            missing.push(twin);
        }
    }
    (!missing.is_empty()).then_some(missing)
}

/// For a float literal `+0.0` or `-0.0`, the literal of the other zero.
fn other_zero(item: &Expr) -> Option<Expr> {
    let Expr::Literal(value, metadata) = item else {
        return None;
    };
    let twin = match value {
        ScalarValue::Float64(Some(v)) if *v == 0.0 => ScalarValue::Float64(Some(-*v)),
        ScalarValue::Float32(Some(v)) if *v == 0.0 => ScalarValue::Float32(Some(-*v)),
        ScalarValue::Float16(Some(v)) if v.to_f32() == 0.0 => ScalarValue::Float16(Some(-*v)),
        _ => return None,
    };
    Some(Expr::Literal(twin, metadata.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn in_list(values: &[f64], negated: bool) -> Expr {
        col("f").in_list(values.iter().map(|v| lit(*v)).collect(), negated)
    }

    /// The bits of an IN list's float literals (`None` for anything else).
    fn list_bits(expr: &Expr) -> Option<Vec<u64>> {
        let Expr::InList(InList { list, .. }) = expr else {
            return None;
        };
        list.iter()
            .map(|item| match item {
                Expr::Literal(ScalarValue::Float64(Some(v)), _) => Some(v.to_bits()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_float_in_list_holding_one_zero_gets_the_other_once_under_its_old_name() {
        let cases: [(&[f64], bool); 2] = [
            (&[0.0, 1.0, 2.0, 3.0], false),
            (&[1.0, -0.0, 2.0, -0.0, 3.0], true),
        ];
        for (values, negated) in cases {
            let preserver = NamePreserver::new_for_projection();
            let expr = in_list(values, negated);
            let name = expr.schema_name().to_string();
            let out = complete(&preserver, expr).unwrap();
            assert!(out.transformed);
            let (inner, alias) = match &out.data {
                Expr::Alias(alias) => (alias.expr.as_ref(), Some(alias.name.clone())),
                other => (other, None),
            };
            assert_eq!(alias, Some(name), "the rewritten list keeps its name");
            let bits = list_bits(inner).unwrap();
            for zero in [0.0f64.to_bits(), (-0.0f64).to_bits()] {
                assert!(bits.contains(&zero), "{values:?}: {bits:x?}");
            }
            assert_eq!(bits.len(), values.len() + 1, "one zero added");
        }
    }

    #[test]
    fn lists_without_a_zero_or_with_both_are_left_alone() {
        let preserver = NamePreserver::new_for_projection();
        for values in [&[1.0, 2.0, 3.0, 4.0][..], &[0.0, -0.0, 5.0, 6.0][..]] {
            let out = complete(&preserver, in_list(values, false)).unwrap();
            assert!(!out.transformed, "{values:?}");
        }
        let ints = col("i").in_list(vec![lit(0i64), lit(1i64), lit(2i64), lit(3i64)], false);
        assert!(!complete(&preserver, ints).unwrap().transformed);
    }
}
