//! Column-only projections above a GPU filter or join, folded into the operator.
//!
//! DataFusion's `ProjectionPushdown` runs after the placement rule. For its own
//! `FilterExec` and `HashJoinExec` it folds a projection above them into the operator
//! (`try_embed_projection`), so a join gathers only the columns someone reads and a
//! filter copies only those it passes on. Without the same for the GPU operators, a
//! placed plan kept the `ProjectionExec` above them and the operator gathered every
//! column of both sides, strings included: on a two-key join of 10 M rows that was a
//! third of the time. The projection's column indices are composed with the operator's
//! current projection; a projection of expressions or renames keeps a `ProjectionExec`
//! for those (DataFusion's helper decides), and an empty one is left alone (the
//! operators always emit at least one column).

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::{
    EmbeddedProjection, ProjectionExec, try_embed_projection,
};

/// The projection `then` (indices into the current output) after `current` (the
/// operator's projection into its unprojected output, `None`: all columns).
pub(crate) fn compose(current: Option<&[usize]>, then: &[usize]) -> Option<Vec<usize>> {
    then.iter()
        .map(|i| match current {
            Some(current) => current.get(*i).copied(),
            None => Some(*i),
        })
        .collect()
}

/// `exec` with `projection` folded in, DataFusion's way, unless it is empty.
pub(crate) fn try_embed<Exec: EmbeddedProjection + 'static>(
    projection: &ProjectionExec,
    exec: &Exec,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if projection.expr().is_empty() {
        return Ok(None);
    }
    try_embed_projection(projection, exec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projection_of_a_projection_reads_through_both() {
        assert_eq!(compose(None, &[2, 0]), Some(vec![2, 0]));
        assert_eq!(compose(Some(&[4, 1, 3]), &[2, 0]), Some(vec![3, 4]));
        assert_eq!(compose(Some(&[4]), &[1]), None);
    }
}
