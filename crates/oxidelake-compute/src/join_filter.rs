//! `JoinFilterExec`: drops the probe rows a hash join's build side cannot match where
//! they are read, for as long as that drops enough rows to pay for itself.
//!
//! Once a DataFusion 55 hash join has its build side, it fills a *dynamic filter* (the
//! key range and the key set the probe side can match) and hands it down the probe side
//! to the Parquet scans. With `datafusion.execution.parquet.pushdown_filters` off (the
//! lake default: for static filters it costs more than it saves), a scan uses the filter
//! only to skip row groups by statistics. That skips nothing when the keys are not
//! clustered, so a semi join that keeps 57 orders (TPC-H Q18) still repartitions and
//! probes every lineitem row.
//!
//! This operator sits on such a scan (or on the `FilterExec` right above it) and applies
//! its dynamic filters (a scan below several joins gets one from each) one after
//! another, each to the rows the ones before it kept:
//! - a filter its join has not filled yet (it reads `true`) is skipped;
//! - a filled one filters the first [`SAMPLE_ROWS`] rows that reach it. If more than
//!   `max_kept` of them survive ([`MAX_KEPT`], a half, by default), it is dropped for the
//!   rest of the partition; otherwise it goes on filtering. A filter over a large build
//!   side is a hash and a lookup per row, about what the join's probe costs, so it pays
//!   only when it spares the repartition and the probe of many rows. On TPC-H SF 1 a
//!   bound of a tenth was slower than a half, and a bound on a filter's measured cost
//!   per dropped row did not help either (docs/benchmarks.md);
//! - once a filter's sample is judged, the filters are ordered by the fraction they
//!   kept, so the most selective one runs first and the others see only its survivors;
//! - a Partitioned-mode join's filter whose branches list keys is evaluated as one list,
//!   without the `CASE` over the repartitioning hash (`merged`; counted in
//!   `partitions_merged`).
//!
//! A dynamic filter only removes rows that cannot join, and the join still checks every
//! row it gets, so the rows of the query are the same either way. The scan keeps its
//! whole predicate for pruning row groups and pages. EXPLAIN ANALYZE shows
//! `rows_checked`, `rows_dropped` and `sampled_unselective` (one for each filter a
//! partition dropped).

mod merged;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::AsArray;
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::{CaseExpr, DynamicFilterPhysicalExpr, Literal};
use datafusion::physical_expr::{PhysicalExpr, conjunction};
use datafusion::physical_plan::joins::HashTableLookupExpr;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
    statistics::ChildStats,
};
use futures::{StreamExt, TryStreamExt};

use crate::exec_support::{RowsKept, rows_of_input, single_child};

/// Rows filtered before the operator judges whether filtering pays.
pub const SAMPLE_ROWS: usize = 65_536;

/// The default of the largest fraction of its sampled rows a filter may keep and go on
/// filtering (`oxidelake.scan.join_filter_max_kept`).
pub const MAX_KEPT: f64 = 0.5;

/// See the module docs.
#[derive(Debug)]
pub struct JoinFilterExec {
    input: Arc<dyn ExecutionPlan>,
    /// The dynamic filters, their columns those of `input`'s output.
    filters: Vec<Arc<DynamicFilterPhysicalExpr>>,
    /// Their conjunction.
    predicate: Arc<dyn PhysicalExpr>,
    /// The largest fraction of its sample a filter may keep and go on filtering.
    max_kept: f64,
    /// Whether filters filled by Partitioned-mode joins are applied.
    partitioned: bool,
    /// Per filter: apply its Partitioned-mode form even when `partitioned` is off (its
    /// join aggregates the probe side above the scan).
    lookups_pay: Vec<bool>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl JoinFilterExec {
    /// Filters `input` by `filters`, whose columns must be those of `input`'s output; a
    /// filter that keeps more than `max_kept` of its sample is dropped.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        filters: Vec<Arc<DynamicFilterPhysicalExpr>>,
        max_kept: f64,
    ) -> Result<Self> {
        if filters.is_empty() {
            return Err(DataFusionError::Internal(
                "JoinFilterExec needs at least one dynamic filter".to_string(),
            ));
        }
        let predicate = conjunction(
            filters
                .iter()
                .map(|f| Arc::clone(f) as Arc<dyn PhysicalExpr>),
        );
        let data_type = predicate.data_type(&input.schema())?;
        if data_type != DataType::Boolean {
            return Err(DataFusionError::Internal(format!(
                "JoinFilterExec's filter is {data_type}, not Boolean"
            )));
        }
        Ok(Self {
            properties: Arc::clone(input.properties()),
            input,
            filters,
            predicate,
            max_kept,
            partitioned: true,
            lookups_pay: Vec::new(),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// Marks, per filter (in the order given to [`JoinFilterExec::try_new`]), the ones
    /// whose Partitioned-mode lookups are applied even when
    /// [`JoinFilterExec::with_partitioned`] is off: filters whose join aggregates the
    /// probe rows between this scan and itself, so a dropped row spares an aggregation
    /// too, not only a repartition and a probe (TPC-H Q20). Missing entries are `false`.
    pub fn with_lookups_that_pay(mut self, pay: Vec<bool>) -> Self {
        self.lookups_pay = pay;
        self
    }

    /// Whether the hash-table lookups of Partitioned-mode joins are applied (`true` by
    /// default). DataFusion fills such a join's filter with a `CASE` over the
    /// repartitioning hash whose branches test the key range and then look the row up in
    /// that partition's hash table (or, for a small build partition, in a key list): a
    /// hash and a lookup per row, about what the repartition and probe they spare cost.
    /// When off, a filter of that form with lookups is skipped once filled (counted in
    /// `skipped_partitioned`); one with key lists only is applied like any other.
    pub fn with_partitioned(mut self, partitioned: bool) -> Self {
        self.partitioned = partitioned;
        self
    }

    /// The dynamic filters this node evaluates.
    pub fn filters(&self) -> &[Arc<DynamicFilterPhysicalExpr>] {
        &self.filters
    }
}

impl DisplayAs for JoinFilterExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "JoinFilterExec: max_kept={}, {}",
                    self.max_kept, self.predicate
                )
            }
            DisplayFormatType::TreeRender => write!(f, "predicate={}", self.predicate),
        }
    }
}

impl ExecutionPlan for JoinFilterExec {
    crate::exec_support::operator_basics!("JoinFilterExec");

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    /// The input's estimate as an upper bound: this node only drops rows, and how many it
    /// drops is known once the join has built.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        Ok(rows_of_input(input_stats, &self.schema(), RowsKept::Some))
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        f(&self.predicate)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(
            JoinFilterExec::try_new(
                single_child(children, "JoinFilterExec")?,
                self.filters.clone(),
                self.max_kept,
            )?
            .with_partitioned(self.partitioned)
            .with_lookups_that_pay(self.lookups_pay.clone()),
        ))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let mut sampler = Sampler::new(
            &self.filters,
            self.input.schema(),
            self.max_kept,
            &self.metrics,
            partition,
        );
        sampler.partitioned = self.partitioned;
        for (stage, pays) in sampler.stages.iter_mut().zip(&self.lookups_pay) {
            stage.lookups_pay = *pays;
        }
        let stream = input
            .map(move |batch| sampler.step(batch?))
            .try_filter(|batch| futures::future::ready(batch.num_rows() > 0));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.input.schema(),
            stream,
        )))
    }
}

/// Where one dynamic filter stands in a partition's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// It still reads `true`: the join has not filled it yet.
    Waiting,
    /// Filtering the first [`SAMPLE_ROWS`] rows that reach it.
    Sampling,
    /// Its sample was selective: filtering every batch.
    Filtering,
    /// Its sample was not selective: no longer evaluated.
    Dropped,
}

/// One dynamic filter and what it did in this partition.
struct Stage {
    filter: Arc<DynamicFilterPhysicalExpr>,
    /// Apply its Partitioned-mode lookups even when those are off.
    lookups_pay: bool,
    /// What is evaluated once it is filled, where that is not the filter itself: its
    /// routing `CASE` merged away (see `merged`).
    merged: Option<Arc<dyn PhysicalExpr>>,
    mode: Mode,
    checked: usize,
    kept: usize,
}

impl Stage {
    /// The fraction of its rows it kept so far (1 before it saw any).
    fn kept_fraction(&self) -> f64 {
        if self.checked == 0 {
            1.0
        } else {
            self.kept as f64 / self.checked as f64
        }
    }

    /// Whether its join has filled it (it no longer reads `true`), and in which form.
    fn filled(&self, schema: &Schema) -> Result<Option<Form>> {
        let current = self.filter.current()?;
        if current
            .downcast_ref::<Literal>()
            .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(true)))
        {
            return Ok(None);
        }
        let per_partition = current.downcast_ref::<CaseExpr>().is_some();
        let looks_up = current.exists(|e| Ok(e.downcast_ref::<HashTableLookupExpr>().is_some()))?;
        Ok(Some(if per_partition && looks_up {
            Form::PartitionLookups
        } else if let Some(merged) = merged::merged(&current, schema) {
            Form::PartitionLists(merged)
        } else {
            Form::Other
        }))
    }
}

/// What a filled dynamic filter looks like.
#[derive(Debug, Clone)]
enum Form {
    /// A Partitioned-mode join's `CASE` over the repartitioning hash whose branches look
    /// rows up in the partitions' hash tables (build sides too large for a key list).
    PartitionLookups,
    /// A Partitioned-mode join's `CASE` whose branches list keys, and the same filter
    /// without the `CASE`.
    PartitionLists(Arc<dyn PhysicalExpr>),
    /// Anything else: a CollectLeft join's key range with a key list or a hash-table
    /// lookup.
    Other,
}

/// The filters of one partition's stream, applied one after another to what the previous
/// ones kept, the most selective first.
struct Sampler {
    stages: Vec<Stage>,
    /// The schema of the batches filtered.
    schema: SchemaRef,
    max_kept: f64,
    /// Whether Partitioned-mode joins' filters are applied.
    partitioned: bool,
    baseline: BaselineMetrics,
    rows_checked: Count,
    rows_dropped: Count,
    unselective: Count,
    skipped_partitioned: Count,
    partitions_merged: Count,
}

impl Sampler {
    /// Partition `partition`'s sampler of `filters`, reporting to `metrics`.
    fn new(
        filters: &[Arc<DynamicFilterPhysicalExpr>],
        schema: SchemaRef,
        max_kept: f64,
        metrics: &ExecutionPlanMetricsSet,
        partition: usize,
    ) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            stages: filters
                .iter()
                .map(|filter| Stage {
                    filter: Arc::clone(filter),
                    lookups_pay: false,
                    merged: None,
                    mode: Mode::Waiting,
                    checked: 0,
                    kept: 0,
                })
                .collect(),
            schema,
            max_kept,
            partitioned: true,
            baseline: BaselineMetrics::new(metrics, partition),
            rows_checked: counter("rows_checked"),
            rows_dropped: counter("rows_dropped"),
            unselective: counter("sampled_unselective"),
            skipped_partitioned: counter("skipped_partitioned"),
            partitions_merged: counter("partitions_merged"),
        }
    }

    fn step(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let started = Instant::now();
        let rows_in = batch.num_rows();
        let mut batch = batch;
        let mut checked = false;
        let mut reorder = false;
        for stage in &mut self.stages {
            if stage.mode == Mode::Waiting {
                match stage.filled(&self.schema)? {
                    None => {}
                    Some(Form::PartitionLookups) if !self.partitioned && !stage.lookups_pay => {
                        self.skipped_partitioned.add(1);
                        stage.mode = Mode::Dropped;
                    }
                    Some(Form::PartitionLists(merged)) => {
                        self.partitions_merged.add(1);
                        stage.merged = Some(merged);
                        stage.mode = Mode::Sampling;
                    }
                    Some(_) => stage.mode = Mode::Sampling,
                }
            }
            if matches!(stage.mode, Mode::Waiting | Mode::Dropped) || batch.num_rows() == 0 {
                continue;
            }
            let rows = batch.num_rows();
            let mask = match &stage.merged {
                Some(merged) => merged.evaluate(&batch)?,
                None => stage.filter.evaluate(&batch)?,
            }
            .into_array(rows)?;
            batch = filter_record_batch(&batch, mask.as_boolean())?;
            checked = true;
            stage.checked += rows;
            stage.kept += batch.num_rows();
            if stage.mode == Mode::Sampling && stage.checked >= SAMPLE_ROWS {
                stage.mode = if stage.kept_fraction() > self.max_kept {
                    self.unselective.add(1);
                    Mode::Dropped
                } else {
                    Mode::Filtering
                };
                reorder = true;
            }
        }
        if reorder {
            self.stages
                .sort_by(|a, b| a.kept_fraction().total_cmp(&b.kept_fraction()));
        }
        if checked {
            self.rows_checked.add(rows_in);
            self.rows_dropped.add(rows_in - batch.num_rows());
            self.baseline.elapsed_compute().add_elapsed(started);
        }
        self.baseline.record_output(batch.num_rows());
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, InListExpr, lit};
    use datafusion::physical_plan::joins::join_hash_map::JoinHashMapU32;
    use datafusion::physical_plan::joins::{Map, SeededRandomState};
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

    fn batch(start: i64, rows: i64) -> RecordBatch {
        let a: Arc<dyn Array> = Arc::new(Int64Array::from_iter_values(start..start + rows));
        RecordBatch::try_from_iter([("a", a)]).unwrap()
    }

    /// A dynamic filter over column `a`, still `true`.
    fn unfilled() -> Arc<DynamicFilterPhysicalExpr> {
        let a: Arc<dyn PhysicalExpr> = Arc::new(Column::new("a", 0));
        Arc::new(DynamicFilterPhysicalExpr::new(vec![a], lit(true)))
    }

    /// `a % 10 <op> rest`.
    fn last_digit(op: Operator, rest: i64) -> Arc<dyn PhysicalExpr> {
        let a: Arc<dyn PhysicalExpr> = Arc::new(Column::new("a", 0));
        let digit = Arc::new(BinaryExpr::new(a, Operator::Modulo, lit(10i64)));
        Arc::new(BinaryExpr::new(digit, op, lit(rest)))
    }

    /// The values of `start..start + rows` whose last digit is 0.
    fn tens(start: i64, rows: i64) -> usize {
        (start..start + rows).filter(|v| v % 10 == 0).count()
    }

    fn sampler(filters: &[Arc<DynamicFilterPhysicalExpr>]) -> Sampler {
        Sampler::new(
            filters,
            batch(0, 1).schema(),
            MAX_KEPT,
            &ExecutionPlanMetricsSet::new(),
            0,
        )
    }

    /// A filter filled with the shape DataFusion gives a Partitioned-mode join's: a CASE
    /// over the partition of the row (here `a % 2`), one branch per partition. The even
    /// partition keeps rows ending in 0; the odd one tests `odd`.
    fn per_partition(odd: Arc<dyn PhysicalExpr>) -> Arc<DynamicFilterPhysicalExpr> {
        let a: Arc<dyn PhysicalExpr> = Arc::new(Column::new("a", 0));
        let partition = Arc::new(BinaryExpr::new(a, Operator::Modulo, lit(2i64)));
        let case = CaseExpr::try_new(
            Some(partition),
            vec![(lit(0i64), last_digit(Operator::Eq, 0)), (lit(1i64), odd)],
            Some(lit(false)),
        )
        .unwrap();
        let filter = unfilled();
        filter.update(Arc::new(case)).unwrap();
        filter
    }

    #[test]
    fn a_partitioned_joins_hash_table_lookups_are_skipped_when_partitioned_filters_are_off() {
        // The odd partition looks rows up in its (empty) hash table.
        let a: Arc<dyn PhysicalExpr> = Arc::new(Column::new("a", 0));
        let map = Map::HashMap(Box::new(JoinHashMapU32::with_capacity(0)));
        let lookup = Arc::new(HashTableLookupExpr::new(
            vec![a],
            SeededRandomState::with_seed(0),
            Arc::new(map),
            "hash_lookup".to_string(),
        ));
        let filter = per_partition(lookup);
        let mut off = sampler(&[Arc::clone(&filter)]);
        off.partitioned = false;
        assert_eq!(off.step(batch(0, 1000)).unwrap().num_rows(), 1000);
        assert_eq!(off.skipped_partitioned.value(), 1);
        assert_eq!(off.rows_checked.value(), 0);

        let mut on = sampler(&[filter]);
        // Even rows ending in 0; no odd row is in the empty table.
        assert_eq!(on.step(batch(0, 1000)).unwrap().num_rows(), 100);
        assert_eq!(on.skipped_partitioned.value(), 0);
    }

    #[test]
    fn a_partitioned_joins_key_lists_are_applied_when_partitioned_filters_are_off() {
        let mut off = sampler(&[per_partition(last_digit(Operator::Eq, 1))]);
        off.partitioned = false;
        // Even rows ending in 0 and odd rows ending in 1: 100 + 100 of 1000.
        assert_eq!(off.step(batch(0, 1000)).unwrap().num_rows(), 200);
        assert_eq!(off.skipped_partitioned.value(), 0);
    }

    #[test]
    fn a_partitioned_joins_key_lists_are_checked_as_one_list_without_the_routing_case() {
        let a: Arc<dyn PhysicalExpr> = Arc::new(Column::new("a", 0));
        let schema = batch(0, 1).schema();
        let list = |keys: &[i64]| -> Arc<dyn PhysicalExpr> {
            let keys = keys.iter().map(|k| lit(*k)).collect();
            Arc::new(InListExpr::try_new(Arc::clone(&a), keys, false, &schema).unwrap())
        };
        let partition = Arc::new(BinaryExpr::new(Arc::clone(&a), Operator::Modulo, lit(2i64)));
        let case = CaseExpr::try_new(
            Some(partition),
            vec![(lit(0i64), list(&[10, 500])), (lit(1i64), list(&[7, 999]))],
            Some(lit(false)),
        )
        .unwrap();
        let filter = unfilled();
        filter.update(Arc::new(case)).unwrap();
        let mut sampler = sampler(&[filter]);
        let out = sampler.step(batch(0, 1000)).unwrap();
        let kept: Vec<i64> = out
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .values()
            .to_vec();
        assert_eq!(kept, vec![7, 10, 500, 999]);
        assert_eq!(sampler.partitions_merged.value(), 1);
        assert!(sampler.stages[0].merged.is_some());
    }

    #[test]
    fn batches_pass_unchanged_until_the_join_fills_its_filter() {
        let filter = unfilled();
        let mut sampler = sampler(&[Arc::clone(&filter)]);
        assert_eq!(sampler.step(batch(0, 1000)).unwrap().num_rows(), 1000);
        assert_eq!(sampler.rows_checked.value(), 0);
        filter.update(last_digit(Operator::Eq, 0)).unwrap();
        assert_eq!(sampler.step(batch(0, 1000)).unwrap().num_rows(), 100);
        assert_eq!(sampler.rows_dropped.value(), 900);
    }

    #[test]
    fn an_unselective_filter_is_dropped_after_its_sample_and_the_selective_one_goes_first() {
        let (most, tenth) = (unfilled(), unfilled());
        most.update(last_digit(Operator::NotEq, 3)).unwrap();
        tenth.update(last_digit(Operator::Eq, 0)).unwrap();
        // The unselective filter first: it sees every row until its sample is judged.
        let mut sampler = sampler(&[Arc::clone(&most), Arc::clone(&tenth)]);
        let mut start = 0;
        while sampler.unselective.value() == 0 {
            let out = sampler.step(batch(start, 8192)).unwrap();
            assert_eq!(out.num_rows(), tens(start, 8192));
            start += 8192;
        }
        assert_eq!(
            start as usize, SAMPLE_ROWS,
            "judged once its sample was full"
        );
        assert!(
            Arc::ptr_eq(&sampler.stages[0].filter, &tenth),
            "selective first"
        );
        assert_eq!(sampler.stages[1].mode, Mode::Dropped);
        let checked_most = sampler.stages[1].checked;
        // Later batches are filtered by the selective filter alone, with the same rows.
        let out = sampler.step(batch(start, 8192)).unwrap();
        assert_eq!(out.num_rows(), tens(start, 8192));
        assert_eq!(
            sampler.stages[1].checked, checked_most,
            "no longer evaluated"
        );
    }
}
