//! The dynamic filter a `GpuHashJoinExec` fills from its build side, as DataFusion's own
//! hash join does: once the build keys are known, the probe side's scans (through
//! `JoinFilterExec`) can drop the rows that cannot match before they are repartitioned
//! and probed.
//!
//! Which joins get a filter, and where it goes, is the stock join's decision
//! (`HashJoinExec::gather_filters_for_pushdown`, asked for by the GPU join): only joins
//! that emit no unmatched probe rows (inner, right semi) filter their probe side. The GPU
//! join fills it with, per key column, the build keys' range and, for a build side of at
//! most [`IN_LIST_MAX_ROWS`] rows, their set (`key IN (...)`). A partitioned join waits
//! for the builds of all its partitions and fills it with their union: a probe row is
//! routed to one partition, but a superset drops no row that any partition can match.
//! Until then the filter reads `true`.

use std::sync::{Arc, Mutex};

use arrow::array::ArrayRef;
use arrow::compute::concat;
use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, DynamicFilterPhysicalExpr, InListExpr, lit,
};
use datafusion::physical_expr::{PhysicalExpr, conjunction};
use datafusion::physical_plan::Accumulator;

/// The most build rows whose keys are listed in the filter (`IN`); past it, the filter
/// holds the key range alone.
pub const IN_LIST_MAX_ROWS: usize = 65_536;

/// A join's dynamic filter and the builds reported to it so far.
#[derive(Debug)]
pub(crate) struct BuildFilter {
    filter: Arc<DynamicFilterPhysicalExpr>,
    /// The probe key expressions (columns of the probe input), in key order.
    probe_keys: Vec<Arc<dyn PhysicalExpr>>,
    probe_schema: Arc<Schema>,
    /// How many builds fill the filter: 1 (CollectLeft) or the partition count.
    builds: usize,
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
    ) -> Self {
        let keys = probe_keys.len();
        Self {
            filter,
            probe_keys,
            probe_schema,
            builds: builds.max(1),
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
        if reports.rows > IN_LIST_MAX_ROWS {
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
                parts.push(Arc::new(InListExpr::try_new_from_array(
                    Arc::clone(probe),
                    values,
                    false,
                    &self.probe_schema,
                )?));
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
    use datafusion::physical_expr::expressions::Column;

    fn setup(builds: usize) -> (BuildFilter, Arc<Schema>) {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let key: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&key)],
            lit(true),
        ));
        (
            BuildFilter::new(filter, vec![key], Arc::clone(&schema), builds),
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
    fn a_large_build_side_fills_its_filter_with_the_key_range_alone() {
        let (filter, schema) = setup(1);
        let keys = Int64Array::from_iter_values((0..IN_LIST_MAX_ROWS as i64 + 1).map(|k| k * 2));
        filter.report(&[Arc::new(keys) as ArrayRef]);
        let max = IN_LIST_MAX_ROWS as i64 * 2;
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
