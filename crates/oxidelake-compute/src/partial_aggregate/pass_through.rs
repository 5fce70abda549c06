//! Passing rows through as partial states when partial aggregation does not reduce.
//!
//! A partial aggregate earns its keep by shrinking its input: one state row per group
//! and batch instead of one per row. Grouped by a key with about as many values as rows
//! per batch (TPC-H Q17's `l_partkey`), it shrinks nothing, and grouping each batch only
//! adds a hash pass (and, on a GPU, a transfer) before the final aggregate groups the
//! same rows again. DataFusion's own partial aggregate probes its ratio of groups to
//! rows over the first rows of each partition and then turns every further row into its
//! own state row; this does the same with the same two settings
//! (`datafusion.execution.skip_partial_aggregation_probe_rows_threshold` and
//! `…_probe_ratio_threshold`), so a placed plan skips exactly where a stock plan would.
//!
//! A row's state is what the grouped path returns for a group of that row alone: SUM,
//! MIN and MAX the value in the state type (NULL stays NULL), the checked SUM that value
//! and a wrap count of 0, COUNT 1 or 0, AVG a count of 1 (NULL for a NULL value, as the
//! grouped path marks a group without values) and the value as its sum.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::SchemaRef;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};

use super::spec::{self, PartialAggSpec, PartialFunc};
use crate::checked_sum::zero_wraps;

/// Whether a partition's partial aggregate has given up on reducing (see module docs).
#[derive(Debug)]
pub(super) struct SkipProbe {
    rows_in: usize,
    rows_out: usize,
    probe_rows: usize,
    ratio: f64,
    decided: bool,
    skipping: bool,
}

impl SkipProbe {
    /// A probe with the session's thresholds.
    pub(super) fn new(options: &ConfigOptions) -> Self {
        Self {
            rows_in: 0,
            rows_out: 0,
            probe_rows: options
                .execution
                .skip_partial_aggregation_probe_rows_threshold,
            ratio: options
                .execution
                .skip_partial_aggregation_probe_ratio_threshold,
            decided: false,
            skipping: false,
        }
    }

    /// Whether further rows pass through as their own states.
    pub(super) fn skipping(&self) -> bool {
        self.skipping
    }

    /// Counts an aggregated batch; once enough rows are seen, decides for good.
    pub(super) fn record(&mut self, rows_in: usize, rows_out: usize) {
        if self.decided {
            return;
        }
        self.rows_in += rows_in;
        self.rows_out += rows_out;
        if self.rows_in >= self.probe_rows {
            self.decided = true;
            self.skipping = self.rows_out as f64 / self.rows_in.max(1) as f64 >= self.ratio;
        }
    }
}

/// Every row of `batch` as its own partial state row: the key columns as they are, then
/// each aggregate's state columns of `schema`.
pub(super) fn row_states(
    batch: &RecordBatch,
    keys: &[usize],
    aggregates: &[PartialAggSpec],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = keys.iter().map(|k| Arc::clone(batch.column(*k))).collect();
    for agg in aggregates {
        let argument = agg
            .input
            .as_ref()
            .map(|input| spec::argument(batch, input))
            .transpose()?;
        let at = columns.len();
        let state_type = |offset: usize| schema.field(at + offset).data_type().clone();
        let value = || {
            argument.as_ref().ok_or_else(|| {
                DataFusionError::Internal(format!("{} without an argument", agg.func.name()))
            })
        };
        match agg.func {
            PartialFunc::Count => {
                let counts: Int64Array = match argument.as_ref().and_then(|a| a.logical_nulls()) {
                    Some(nulls) => nulls.iter().map(i64::from).collect(),
                    None => Int64Array::from(vec![1i64; rows]),
                };
                columns.push(Arc::new(counts));
            }
            PartialFunc::Sum | PartialFunc::Min | PartialFunc::Max => {
                let to = state_type(0);
                columns.push(arrow::compute::cast(value()?, &to)?);
            }
            PartialFunc::CheckedSum => {
                let to = state_type(0);
                columns.push(arrow::compute::cast(value()?, &to)?);
                columns.push(Arc::new(zero_wraps(rows)));
            }
            PartialFunc::Avg => {
                let value = value()?;
                let counts = UInt64Array::new(vec![1u64; rows].into(), value.logical_nulls());
                let to = state_type(1);
                let sums = arrow::compute::cast(value, &to)?;
                columns.push(Arc::new(counts));
                columns.push(sums);
            }
        }
    }
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Decimal128Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Decimal128Type, Field, Int64Type, Schema, UInt64Type};

    use super::*;
    use crate::partial_aggregate::AggInput;

    #[test]
    fn the_probe_decides_once_after_enough_rows_and_only_on_a_poor_ratio() {
        let mut options = ConfigOptions::new();
        options
            .execution
            .skip_partial_aggregation_probe_rows_threshold = 100;
        options
            .execution
            .skip_partial_aggregation_probe_ratio_threshold = 0.8;
        let mut probe = SkipProbe::new(&options);
        probe.record(60, 60);
        assert!(!probe.skipping(), "undecided before the probe rows");
        probe.record(60, 40);
        assert!(probe.skipping(), "100 of 120 rows were groups: 0.83");
        let mut reducing = SkipProbe::new(&options);
        reducing.record(120, 10);
        reducing.record(1000, 1000);
        assert!(
            !reducing.skipping(),
            "decided at the first 120 rows, for good"
        );
    }

    #[test]
    fn each_row_becomes_the_state_a_group_of_that_row_alone_would_have() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "k",
                Arc::new(StringArray::from(vec![Some("a"), None, Some("b")])) as ArrayRef,
            ),
            (
                "n",
                Arc::new(Int32Array::from(vec![Some(4), None, Some(-2)])) as ArrayRef,
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![Some(150), Some(-5), None])
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ) as ArrayRef,
            ),
        ])
        .unwrap();
        let input = |column: usize, cast: Option<DataType>| Some(AggInput { column, cast });
        let aggregates = vec![
            PartialAggSpec {
                func: PartialFunc::Count,
                input: None,
            },
            PartialAggSpec {
                func: PartialFunc::Count,
                input: input(1, None),
            },
            PartialAggSpec {
                func: PartialFunc::Sum,
                input: input(1, Some(DataType::Int64)),
            },
            PartialAggSpec {
                func: PartialFunc::Max,
                input: input(2, None),
            },
            PartialAggSpec {
                func: PartialFunc::Avg,
                input: input(2, None),
            },
            PartialAggSpec {
                func: PartialFunc::CheckedSum,
                input: input(2, None),
            },
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("count_star", DataType::Int64, false),
            Field::new("count_n", DataType::Int64, false),
            Field::new("sum_n", DataType::Int64, true),
            Field::new("max_d", DataType::Decimal128(15, 2), true),
            Field::new("avg_d_count", DataType::UInt64, true),
            Field::new("avg_d_sum", DataType::Decimal128(25, 2), true),
            Field::new("sum_d[sum]", DataType::Decimal128(25, 2), true),
            Field::new("sum_d[wraps]", DataType::Int64, false),
        ]));
        let out = row_states(&batch, &[0], &aggregates, &schema).unwrap();
        let ints = |i: usize| {
            out.column(i)
                .as_primitive::<Int64Type>()
                .iter()
                .collect::<Vec<_>>()
        };
        let decimals = |i: usize| {
            out.column(i)
                .as_primitive::<Decimal128Type>()
                .iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(out.column(0), batch.column(0));
        assert_eq!(ints(1), vec![Some(1), Some(1), Some(1)]);
        assert_eq!(ints(2), vec![Some(1), Some(0), Some(1)]);
        assert_eq!(ints(3), vec![Some(4), None, Some(-2)]);
        assert_eq!(decimals(4), vec![Some(150), Some(-5), None]);
        let counts: Vec<Option<u64>> = out.column(5).as_primitive::<UInt64Type>().iter().collect();
        assert_eq!(counts, vec![Some(1), Some(1), None]);
        assert_eq!(
            out.schema().field(6).data_type(),
            &DataType::Decimal128(25, 2)
        );
        assert_eq!(decimals(6), vec![Some(150), Some(-5), None]);
        // The checked SUM: the value, and no wraps.
        assert_eq!(decimals(7), vec![Some(150), Some(-5), None]);
        assert_eq!(ints(8), vec![Some(0); 3]);
    }
}
