//! Rows whose join key holds a NULL, in a join where NULL equals nothing (every join the
//! grace join wraps except `IS NOT DISTINCT FROM` ones): such a row matches no row of the
//! other side, in any pair.
//!
//! They used to be hashed like any other row. DataFusion's `create_hashes` leaves a NULL
//! row's hash at its initial value whatever the seed, so every NULL-key row of a
//! partition went to part 0 at every split level: a build side with more NULL keys than
//! memory holds failed after [`super::MAX_DEPTH`] splits with "a join key with that many
//! rows cannot be split further" (issue 44, item 9). Now, per side:
//!
//! - where the join never emits that side's unmatched rows (inner and semi joins; the
//!   other side of outer, anti and mark joins) they are dropped before the build side is
//!   collected and before either side is partitioned ([`NullKeyRows::Dropped`]);
//! - where it does (the preserved side of outer, anti and mark joins) such a row is
//!   unmatched in whatever pair it lands in and is emitted there exactly once, so the
//!   rows are dealt to the parts in turn and split like any other rows
//!   ([`NullKeyRows::Spread`]).

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::buffer::NullBuffer;
use arrow::compute::filter_record_batch;
use arrow::record_batch::RecordBatch;
use datafusion::common::{JoinType, NullEquality};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_plan::joins::HashJoinExec;

use super::side::Side;

/// What a grace step does with the rows of one side whose join key holds a NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NullKeyRows {
    /// NULL equals NULL: such rows match each other, so they are hashed like any other
    /// row (all to one part).
    Hashed,
    /// The join never emits this side's unmatched rows: they are dropped.
    Dropped,
    /// The join emits this side's unmatched rows: they are dealt to the parts in turn.
    Spread,
}

impl NullKeyRows {
    /// The treatment of `side`'s NULL-key rows in `join`.
    pub(super) fn of(join: &HashJoinExec, side: Side) -> Self {
        if join.null_equality() == NullEquality::NullEqualsNull {
            Self::Hashed
        } else if emits_unmatched(*join.join_type(), side) {
            Self::Spread
        } else {
            Self::Dropped
        }
    }
}

/// Whether a join of `join_type` emits the rows of `side` that match nothing.
fn emits_unmatched(join_type: JoinType, side: Side) -> bool {
    match join_type {
        JoinType::Inner | JoinType::LeftSemi | JoinType::RightSemi => false,
        JoinType::Left | JoinType::LeftAnti | JoinType::LeftMark => side == Side::Left,
        JoinType::Right | JoinType::RightAnti | JoinType::RightMark => side == Side::Right,
        JoinType::Full => true,
    }
}

/// The rows whose key columns `keys` hold no NULL (valid bits), or `None` when no row
/// holds one.
pub(super) fn rows_with_keys(keys: &[ArrayRef]) -> Option<NullBuffer> {
    let nulls: Vec<Option<NullBuffer>> = keys.iter().map(|k| k.logical_nulls()).collect();
    NullBuffer::union_many(nulls.iter().map(Option::as_ref)).filter(|n| n.null_count() > 0)
}

/// The key columns `keys` of `batch`.
pub(super) fn key_columns(keys: &[PhysicalExprRef], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    keys.iter()
        .map(|k| k.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}

/// `batch` without its rows whose key (`keys`) holds a NULL, and how many those were.
pub(super) fn without_null_keys(
    batch: RecordBatch,
    keys: &[PhysicalExprRef],
) -> Result<(RecordBatch, usize)> {
    let Some(valid) = rows_with_keys(&key_columns(keys, &batch)?) else {
        return Ok((batch, 0));
    };
    let dropped = valid.null_count();
    let mask = BooleanArray::new(valid.into_inner(), None);
    Ok((filter_record_batch(&batch, &mask)?, dropped))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use datafusion::physical_expr::expressions::Column;

    use super::*;

    #[test]
    fn only_the_sides_whose_unmatched_rows_are_emitted_keep_their_null_keys() {
        use JoinType::*;
        for (join_type, left, right) in [
            (Inner, false, false),
            (LeftSemi, false, false),
            (RightSemi, false, false),
            (Left, true, false),
            (LeftAnti, true, false),
            (LeftMark, true, false),
            (Right, false, true),
            (RightAnti, false, true),
            (RightMark, false, true),
            (Full, true, true),
        ] {
            assert_eq!(emits_unmatched(join_type, Side::Left), left, "{join_type}");
            assert_eq!(
                emits_unmatched(join_type, Side::Right),
                right,
                "{join_type}"
            );
        }
    }

    #[test]
    fn rows_with_a_null_in_any_key_column_are_dropped_and_counted() {
        let a: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4)]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), Some(6), None, Some(8)]));
        let batch = RecordBatch::try_from_iter([("a", a), ("b", b)]).unwrap();
        let keys: Vec<PhysicalExprRef> =
            vec![Arc::new(Column::new("a", 0)), Arc::new(Column::new("b", 1))];
        let (kept, dropped) = without_null_keys(batch.clone(), &keys).unwrap();
        assert_eq!(dropped, 2);
        assert_eq!(kept.num_rows(), 2);
        let kept_a = kept
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(kept_a.values().to_vec(), vec![1, 4]);
        // Without NULL keys the batch is handed back as it is.
        let (same, none) = without_null_keys(kept.clone(), &keys).unwrap();
        assert_eq!(none, 0);
        assert_eq!(same, kept);
    }
}
