//! The dynamic filter a `GpuHashJoinExec` fills from its build side, as DataFusion's own
//! hash join does: once the build keys are known, the probe side's scans (through
//! `JoinFilterExec`) can drop the rows that cannot match before they are repartitioned
//! and probed.
//!
//! Which joins get a filter, and where it goes, is the stock join's decision
//! (`HashJoinExec::gather_filters_for_pushdown`, asked for by the GPU join): only joins
//! that emit no unmatched probe rows (inner, right semi) filter their probe side. The GPU
//! join fills it with, per key column, the build keys' range and their set, in one of
//! two forms, as the stock join chooses between its own two:
//! - a build side within DataFusion's list limits
//!   (`datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values`, 150 rows,
//!   and `…_max_size`, 128 KiB, by default) lists its keys (`key IN (...)`), which scans
//!   can also prune row groups with (statistics, Bloom filters);
//! - a larger one, up to [`KEY_SET_MAX_ROWS`] rows, puts them in a hash set behind one
//!   leaf expression ([`KeySetExpr`]), as the stock join probes its hash table: a long
//!   list made every scan's file open walk one literal per key (see `key_set`).
//!
//! Past [`KEY_SET_MAX_ROWS`] the filter holds the key range alone. A partitioned join
//! waits for the builds of all its partitions and fills it with their union: a probe
//! row is routed to one partition, but a superset drops no row that any partition can
//! match. Until then the filter reads `true`.

use std::sync::{Arc, Mutex};

use arrow::array::ArrayRef;
use arrow::compute::concat;
use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, DynamicFilterPhysicalExpr, InListExpr, lit,
};
use datafusion::physical_expr::{PhysicalExpr, conjunction};
use datafusion::physical_plan::Accumulator;

use super::key_set::KeySetExpr;

/// The most build rows whose keys the filter holds (as a list or a set); past it, the
/// filter holds the key range alone. The set is built from a list expression, about a
/// hundred bytes per key, so it is bounded.
pub const KEY_SET_MAX_ROWS: usize = 65_536;

/// Up to which size a build side's keys are listed in the filter (`IN (...)`) rather
/// than held in a set: DataFusion's own limits for its hash join, read from the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListLimits {
    /// Build rows (a bound on the distinct keys).
    pub rows: usize,
    /// Bytes of the key columns.
    pub bytes: usize,
}

impl ListLimits {
    /// The session's `datafusion.optimizer.hash_join_inlist_pushdown_*` limits.
    pub(crate) fn from_config(config: &ConfigOptions) -> Self {
        Self {
            rows: config
                .optimizer
                .hash_join_inlist_pushdown_max_distinct_values,
            bytes: config.optimizer.hash_join_inlist_pushdown_max_size,
        }
    }
}

#[cfg(test)]
impl Default for ListLimits {
    fn default() -> Self {
        Self::from_config(&ConfigOptions::default())
    }
}

/// A join's dynamic filter and the builds reported to it so far.
#[derive(Debug)]
pub(crate) struct BuildFilter {
    filter: Arc<DynamicFilterPhysicalExpr>,
    /// The probe key expressions (columns of the probe input), in key order.
    probe_keys: Vec<Arc<dyn PhysicalExpr>>,
    probe_schema: Arc<Schema>,
    /// How many builds fill the filter: 1 (CollectLeft) or the partition count.
    builds: usize,
    /// Up to where the keys are listed rather than held in a set.
    list_limits: ListLimits,
    reports: Mutex<Reports>,
}

#[derive(Debug, Default)]
struct Reports {
    /// A report could not be used: the filter stays `true`.
    failed: bool,
    seen: usize,
    rows: usize,
    /// Per key column, the build keys reported so far, while they are few enough to list.
    listed: Option<Vec<Vec<ArrayRef>>>,
    /// Per key column, the smallest and largest non-null build key so far.
    bounds: Vec<Option<(ScalarValue, ScalarValue)>>,
}

impl BuildFilter {
    /// A filter to be filled from `builds` build sides.
    pub(crate) fn new(
        filter: Arc<DynamicFilterPhysicalExpr>,
        probe_keys: Vec<Arc<dyn PhysicalExpr>>,
        probe_schema: Arc<Schema>,
        builds: usize,
        list_limits: ListLimits,
    ) -> Self {
        let keys = probe_keys.len();
        Self {
            filter,
            probe_keys,
            probe_schema,
            builds: builds.max(1),
            list_limits,
            reports: Mutex::new(Reports {
                listed: Some(vec![Vec::new(); keys]),
                bounds: vec![None; keys],
                ..Reports::default()
            }),
        }
    }

    /// The filter this join fills.
    pub(crate) fn filter(&self) -> &Arc<DynamicFilterPhysicalExpr> {
        &self.filter
    }

    /// Up to where this filter lists its keys.
    pub(crate) fn list_limits(&self) -> ListLimits {
        self.list_limits
    }

    /// Adds one build side's key columns (in key order); the last of the expected builds
    /// fills the filter. A filter that cannot be made (a key type the range or the list
    /// does not cover) is left reading `true`: it then drops nothing, which is always
    /// correct, and the query goes on.
    pub(crate) fn report(&self, keys: &[ArrayRef]) {
        if let Err(e) = self.try_report(keys) {
            tracing::warn!(error = %e, "a join's dynamic filter was left unfilled");
        }
    }

    fn try_report(&self, keys: &[ArrayRef]) -> Result<()> {
        let mut reports = self
            .reports
            .lock()
            .map_err(|_| DataFusionError::Internal("a join filter's lock was poisoned".into()))?;
        if reports.failed {
            return Ok(());
        }
        let rows = keys.first().map_or(0, |k| k.len());
        reports.seen += 1;
        reports.rows += rows;
        if reports.rows > KEY_SET_MAX_ROWS {
            reports.listed = None;
        }
        if let Some(listed) = reports.listed.as_mut() {
            for (list, key) in listed.iter_mut().zip(keys) {
                list.push(Arc::clone(key));
            }
        }
        let filled = (|| {
            for (bounds, key) in reports.bounds.iter_mut().zip(keys) {
                *bounds = widened(bounds.take(), key)?;
            }
            if reports.seen < self.builds {
                return Ok(None);
            }
            self.expression(&reports).map(Some)
        })();
        match filled {
            Ok(Some(expr)) => {
                self.filter.update(expr)?;
                self.filter.mark_complete();
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                reports.failed = true;
                Err(e)
            }
        }
    }

    /// The filter of all reported builds.
    fn expression(&self, reports: &Reports) -> Result<Arc<dyn PhysicalExpr>> {
        let mut parts: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
        for (i, probe) in self.probe_keys.iter().enumerate() {
            // No non-null build key: no probe row can match.
            let Some((min, max)) = reports.bounds[i].clone() else {
                return Ok(lit(false));
            };
            parts.push(Arc::new(BinaryExpr::new(
                Arc::clone(probe),
                Operator::GtEq,
                lit(min),
            )));
            parts.push(Arc::new(BinaryExpr::new(
                Arc::clone(probe),
                Operator::LtEq,
                lit(max),
            )));
            if let Some(listed) = &reports.listed {
                let arrays: Vec<&dyn arrow::array::Array> =
                    listed[i].iter().map(|a| a.as_ref()).collect();
                let values = concat(&arrays)?;
                let listable = values.len() <= self.list_limits.rows
                    && values.get_array_memory_size() <= self.list_limits.bytes;
                parts.push(if listable {
                    Arc::new(InListExpr::try_new_from_array(
                        Arc::clone(probe),
                        values,
                        false,
                        &self.probe_schema,
                    )?)
                } else {
                    Arc::new(KeySetExpr::try_new(
                        Arc::clone(probe),
                        values,
                        &self.probe_schema,
                    )?)
                });
            }
        }
        Ok(conjunction(parts))
    }
}

/// `bounds` widened by the non-null values of `key`.
fn widened(
    bounds: Option<(ScalarValue, ScalarValue)>,
    key: &ArrayRef,
) -> Result<Option<(ScalarValue, ScalarValue)>> {
    if key.null_count() == key.len() {
        return Ok(bounds);
    }
    let mut min = MinAccumulator::try_new(key.data_type())?;
    let mut max = MaxAccumulator::try_new(key.data_type())?;
    min.update_batch(std::slice::from_ref(key))?;
    max.update_batch(std::slice::from_ref(key))?;
    let (lo, hi) = (min.evaluate()?, max.evaluate()?);
    Ok(Some(match bounds {
        None => (lo, hi),
        Some((old_lo, old_hi)) => (
            if lo < old_lo { lo } else { old_lo },
            if hi > old_hi { hi } else { old_hi },
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field};
    use arrow::record_batch::RecordBatch;
    use datafusion::common::tree_node::TreeNode;
    use datafusion::physical_expr::expressions::Column;

    fn setup(builds: usize) -> (BuildFilter, Arc<Schema>) {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let key: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&key)],
            lit(true),
        ));
        (
            BuildFilter::new(
                filter,
                vec![key],
                Arc::clone(&schema),
                builds,
                ListLimits::default(),
            ),
            schema,
        )
    }

    fn kept(filter: &BuildFilter, schema: &Arc<Schema>, probe: Vec<Option<i64>>) -> Vec<i64> {
        let column: ArrayRef = Arc::new(Int64Array::from(probe));
        let batch = RecordBatch::try_new(Arc::clone(schema), vec![Arc::clone(&column)]).unwrap();
        let mask = filter
            .filter()
            .evaluate(&batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        let mask = mask.as_boolean();
        (0..column.len())
            .filter(|i| mask.is_valid(*i) && mask.value(*i))
            .map(|i| {
                column
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(i)
            })
            .collect()
    }

    #[test]
    fn a_partitioned_join_fills_its_filter_with_every_partitions_keys_once_all_have_built() {
        let (filter, schema) = setup(2);
        let probe = || (0..20).map(Some).chain([None]).collect::<Vec<_>>();
        filter.report(&[Arc::new(Int64Array::from(vec![Some(3), None, Some(7)])) as ArrayRef]);
        assert_eq!(
            kept(&filter, &schema, probe()).len(),
            21,
            "still true: every row"
        );
        filter.report(&[Arc::new(Int64Array::from(vec![12, 5])) as ArrayRef]);
        assert_eq!(kept(&filter, &schema, probe()), vec![3, 5, 7, 12]);
    }

    #[test]
    fn a_build_side_past_the_list_limits_holds_its_keys_in_one_set_not_a_literal_each() {
        let (filter, schema) = setup(1);
        let rows = ListLimits::default().rows as i64 + 1;
        filter.report(&[
            Arc::new(Int64Array::from_iter_values((0..rows).map(|k| k * 2))) as ArrayRef,
        ]);
        assert_eq!(
            kept(
                &filter,
                &schema,
                vec![Some(0), Some(1), Some(2), Some(rows * 2)]
            ),
            vec![0, 2],
            "only build keys pass"
        );
        let current = filter.filter().current().unwrap();
        let mut literals = 0;
        current
            .apply(|e| {
                literals += usize::from(
                    e.downcast_ref::<datafusion::physical_expr::expressions::Literal>()
                        .is_some(),
                );
                Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
            })
            .unwrap();
        assert_eq!(
            literals, 2,
            "the range's two bounds, no literal per key: {current}"
        );
        assert!(
            current
                .to_string()
                .contains(&format!("<{rows} build keys>")),
            "{current}"
        );
    }

    #[test]
    fn a_build_side_within_the_list_limits_lists_its_keys() {
        let (filter, schema) = setup(1);
        filter.report(&[Arc::new(Int64Array::from(vec![4, 9])) as ArrayRef]);
        let current = filter.filter().current().unwrap();
        assert!(
            current.to_string().contains("IN (SET) ([4, 9])"),
            "a list scans can prune with: {current}"
        );
        assert_eq!(
            kept(&filter, &schema, vec![Some(4), Some(5), Some(9)]),
            vec![4, 9]
        );
    }

    #[test]
    fn a_large_build_side_fills_its_filter_with_the_key_range_alone() {
        let (filter, schema) = setup(1);
        let keys = Int64Array::from_iter_values((0..KEY_SET_MAX_ROWS as i64 + 1).map(|k| k * 2));
        filter.report(&[Arc::new(keys) as ArrayRef]);
        let max = KEY_SET_MAX_ROWS as i64 * 2;
        assert_eq!(
            kept(
                &filter,
                &schema,
                vec![Some(-1), Some(1), Some(max), Some(max + 1)]
            ),
            vec![1, max],
            "odd keys pass: only the range is checked"
        );
    }

    #[test]
    fn a_build_side_without_keys_drops_every_probe_row() {
        let (filter, schema) = setup(1);
        filter.report(&[Arc::new(Int64Array::from(vec![None, None])) as ArrayRef]);
        assert!(kept(&filter, &schema, vec![Some(1), None]).is_empty());
    }

    #[test]
    fn keys_the_filter_cannot_cover_leave_it_true_and_the_query_going() {
        let (filter, schema) = setup(1);
        // A key column of another type than the probe key: no IN list can compare them.
        let strings: ArrayRef = Arc::new(arrow::array::StringArray::from(vec!["a", "b"]));
        filter.report(&[strings]);
        assert_eq!(kept(&filter, &schema, vec![Some(1), Some(2)]), vec![1, 2]);
    }
}
