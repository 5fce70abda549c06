//! `GpuPartialAggregateExec`'s one batch function, over segment batches in either form
//! ([`crate::segment`]).
//!
//! Where the aggregate's input hands on device batches (a GPU filter or projection
//! between transitions), the aggregate reads them in place and is itself the way back to
//! the host: its result, one row per group and batch, is all that crosses. The device
//! groups the rows by the key columns where they lie, so keys of any number and type
//! a device batch holds (strings included) need no numbering on the host.
//!
//! One plan ([`AggregatePlan`]) maps the aggregates onto the backends' [`Agg`]s: SUM and
//! AVG of floats, of integers and of decimals (two 32-bit halves of their images, joined
//! exactly on the host into the state: the checked `sum`'s wrapped sum and wrap count, so
//! a group's sum that leaves its state type reaches the final aggregate exactly),
//! COUNT(*) and COUNT(x), MIN / MAX of integers, dates, decimals up to 18 digits and
//! floats. A device batch is read as it lies; an aggregate over a cast (which the device
//! would have to compute) makes the operator refuse every device batch in place: copy it
//! back and run it as a host batch (`refused_batches`). So does a backend that refuses
//! the batch (CUDA for a decimal column whose batch needs more than 64 bits). A host
//! batch (the CPU backend's, a host input's, or one refused or replayed below) gets its
//! casts and the limbs of a decimal summed past 64 bits appended as columns
//! ([`AggregatePlan::for_host`]) and goes to the backend through the host edge; a batch the
//! device fails is replayed on the CPU from its origin ([`crate::segment`]). Once
//! grouping stops reducing, batches are brought to the host and pass through as their
//! own states.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::utils::normalize_float_zero;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::EngineError;
use oxidelake_device::device_batch::{self, DeviceBatch};
use oxidelake_device::ops::{
    Agg, AggFunc, AggInput as DeviceAggInput, AggregateArgs, HostAggregateArgs,
};
use oxidelake_device::{DeviceStream, GpuBackend};

use super::pass_through::{self, SkipProbe};
use super::spec::{self, AggInput, MAX_DEVICE_DECIMAL_PRECISION, PartialAggSpec, PartialFunc};
use super::{StateFrom, state_columns};
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::SegmentBatch;
use crate::segment::replay::Replay;

/// The backend's aggregates of an operator and how its state columns come from them.
#[derive(Debug)]
pub(super) struct AggregatePlan {
    aggregates: Vec<Agg>,
    states: Vec<StateFrom>,
}

/// Where one aggregate's argument lies in the batch a plan reads.
#[derive(Debug, Clone)]
struct Argument {
    column: usize,
    data_type: DataType,
    /// For a decimal sum past 64 bits: its limbs' columns, lowest first
    /// ([`super::spec::wide_limbs`]).
    limbs: Option<[usize; 3]>,
}

impl AggregatePlan {
    /// The plan for `aggregates` over a device batch of `input`: every argument read
    /// where it lies; `None` when one needs the host (a cast).
    pub(super) fn new(input: &Schema, aggregates: &[PartialAggSpec]) -> Option<Self> {
        let mut arguments = Vec::with_capacity(aggregates.len());
        for spec in aggregates {
            arguments.push(match &spec.input {
                None => None,
                Some(AggInput { column, cast }) => {
                    let data_type = input.fields().get(*column)?.data_type().clone();
                    if cast.as_ref().is_some_and(|to| *to != data_type) {
                        return None;
                    }
                    Some(Argument {
                        column: *column,
                        data_type,
                        limbs: None,
                    })
                }
            });
        }
        Self::over(aggregates, &arguments)
    }

    /// A host batch readied for the plan, and the plan over it: `batch`'s columns, then
    /// each argument DataFusion's coercion casts, cast, and the limbs of each decimal
    /// summed past 64 bits in this batch.
    pub(super) fn for_host(
        batch: &RecordBatch,
        aggregates: &[PartialAggSpec],
    ) -> Result<(RecordBatch, Self)> {
        let mut fields: Vec<Arc<Field>> = batch.schema().fields().iter().cloned().collect();
        let mut columns = batch.columns().to_vec();
        let mut append = |column: ArrayRef| {
            fields.push(Arc::new(Field::new(
                format!("argument {}", fields.len()),
                column.data_type().clone(),
                true,
            )));
            columns.push(column);
            columns.len() - 1
        };
        // Each cast made once, each argument readied once, however many aggregates read
        // them.
        let mut casts: Vec<(&AggInput, usize)> = Vec::new();
        let mut ready: Vec<(&AggInput, bool, Argument)> = Vec::new();
        let mut arguments = Vec::with_capacity(aggregates.len());
        for spec in aggregates {
            let Some(input) = &spec.input else {
                arguments.push(None);
                continue;
            };
            let sums = matches!(
                spec.func,
                PartialFunc::Sum | PartialFunc::CheckedSum | PartialFunc::Avg
            );
            if let Some((_, _, argument)) = ready.iter().find(|(i, s, _)| *i == input && *s == sums)
            {
                arguments.push(Some(argument.clone()));
                continue;
            }
            let value = spec::argument(batch, input)?;
            let column = match &input.cast {
                Some(to) if to != batch.column(input.column).data_type() => {
                    match casts.iter().find(|(i, _)| *i == input) {
                        Some((_, at)) => *at,
                        None => {
                            let at = append(Arc::clone(&value));
                            casts.push((input, at));
                            at
                        }
                    }
                }
                _ => input.column,
            };
            let limbs = match sums {
                true => spec::wide_limbs(&value).map(|limbs| limbs.map(|l| append(Arc::new(l)))),
                false => None,
            };
            let argument = Argument {
                column,
                data_type: value.data_type().clone(),
                limbs,
            };
            ready.push((input, sums, argument.clone()));
            arguments.push(Some(argument));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        let prepared =
            RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)?;
        let plan = Self::over(aggregates, &arguments).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "partial aggregate {aggregates:?} has no plan over its host batch"
            ))
        })?;
        Ok((prepared, plan))
    }

    /// The plan for `aggregates` whose arguments lie at `arguments` (`None`: COUNT(*));
    /// `None` for an argument type outside the backends' model.
    fn over(aggregates: &[PartialAggSpec], arguments: &[Option<Argument>]) -> Option<Self> {
        let mut plan = Self {
            aggregates: Vec::new(),
            states: Vec::new(),
        };
        for (spec, argument) in aggregates.iter().zip(arguments) {
            let state = match spec.func {
                PartialFunc::Count => {
                    let input = argument
                        .as_ref()
                        .map_or(DeviceAggInput::Rows, |a| DeviceAggInput::Valid(a.column));
                    StateFrom::Result(plan.push(AggFunc::Count, input))
                }
                PartialFunc::Sum | PartialFunc::CheckedSum | PartialFunc::Avg => {
                    let argument = argument.as_ref()?;
                    let c = argument.column;
                    if spec.func == PartialFunc::Avg {
                        let count = plan.push(AggFunc::Count, DeviceAggInput::Valid(c));
                        plan.states.push(StateFrom::AvgCount(count));
                    }
                    let parts = match (argument.limbs, &argument.data_type) {
                        // The two 32-bit limbs sum exactly as they are; the top by halves.
                        (Some([low, middle, top]), _) => {
                            let mut parts = vec![
                                (plan.push(AggFunc::Sum, DeviceAggInput::Int(low)), 0),
                                (plan.push(AggFunc::Sum, DeviceAggInput::Int(middle)), 32),
                            ];
                            parts.extend(plan.halves(top, 64));
                            parts
                        }
                        (None, DataType::Float64) => {
                            vec![(plan.push(AggFunc::Sum, DeviceAggInput::Float(c)), 0)]
                        }
                        // By halves, which cannot overflow: an i64 sum of the images could.
                        (
                            None,
                            DataType::Int8
                            | DataType::Int16
                            | DataType::Int32
                            | DataType::Int64
                            | DataType::Decimal128(_, _),
                        ) => plan.halves(c, 0),
                        _ => return None,
                    };
                    StateFrom::of(spec.func, parts)
                }
                PartialFunc::Min | PartialFunc::Max => {
                    let argument = argument.as_ref()?;
                    let c = argument.column;
                    let func = if spec.func == PartialFunc::Min {
                        AggFunc::Min
                    } else {
                        AggFunc::Max
                    };
                    let input = match &argument.data_type {
                        DataType::Int8
                        | DataType::Int16
                        | DataType::Int32
                        | DataType::Int64
                        | DataType::Date32 => DeviceAggInput::Int(c),
                        DataType::Decimal128(p, _) if *p <= MAX_DEVICE_DECIMAL_PRECISION => {
                            DeviceAggInput::Int(c)
                        }
                        DataType::Float64 => DeviceAggInput::Float(c),
                        _ => return None,
                    };
                    StateFrom::Result(plan.push(func, input))
                }
            };
            plan.states.push(state);
        }
        Some(plan)
    }

    /// The SUMs of column `c`'s low and high halves, as parts shifted by `shift` and
    /// `shift + 32`.
    fn halves(&mut self, c: usize, shift: u32) -> Vec<(usize, u32)> {
        vec![
            (self.push(AggFunc::Sum, DeviceAggInput::Low32(c)), shift),
            (
                self.push(AggFunc::Sum, DeviceAggInput::High32(c)),
                shift + 32,
            ),
        ]
    }

    /// The device aggregate `func` over `input`: an existing one when pushed already
    /// (SUM(x) beside AVG(x)'s sum, COUNT(x) beside AVG(x)'s count).
    fn push(&mut self, func: AggFunc, input: DeviceAggInput) -> usize {
        let agg = Agg { func, input };
        if let Some(at) = self.aggregates.iter().position(|a| *a == agg) {
            return at;
        }
        self.aggregates.push(agg);
        self.aggregates.len() - 1
    }
}

/// Where a host batch's partial states are computed.
#[derive(Debug, Clone, Copy)]
enum HostRun {
    /// By the backend, through `oxidelake_device::edge` (the CPU backend's own path; a
    /// device's for a batch it refused in place).
    Backend,
    /// On the CPU; `counted` when the batch is already in `cpu_fallback_batches` (a
    /// replay).
    Cpu { counted: bool },
}

/// What every batch of one partition shares.
pub(super) struct SegmentStates {
    pub(super) keys: Vec<usize>,
    pub(super) aggregates: Vec<PartialAggSpec>,
    pub(super) schema: SchemaRef,
    pub(super) plan: Option<AggregatePlan>,
    pub(super) probe: Mutex<SkipProbe>,
    pub(super) exec: ExecBackend,
    pub(super) metrics: OperatorMetrics,
    /// The node handing on the batches (to replay one on the CPU).
    pub(super) input: Arc<dyn ExecutionPlan>,
}

impl SegmentStates {
    /// The partial states of one segment batch: a device batch on the device (module
    /// docs), a host batch on the host path; a device batch the device fails is
    /// replayed on the CPU from its origin ([`crate::segment`]).
    pub(super) fn states_of(&self, item: SegmentBatch) -> Result<RecordBatch> {
        let started = Instant::now();
        let mut probe = self
            .probe
            .lock()
            .map_err(|_| DataFusionError::Internal("skip probe lock poisoned".into()))?;
        if let Some(host) = item.batch.as_host() {
            // The CPU backend's batches, a host input's, or one the device refused below:
            // the host path, on the backend where it can; one the device failed below,
            // on the CPU.
            let run = match item.cpu_only {
                true => HostRun::Cpu { counted: false },
                false => HostRun::Backend,
            };
            return self.host_states(&mut probe, host, run, started, 0);
        }
        let replay = Replay {
            input: &self.input,
            exec: &self.exec,
            metrics: &self.metrics,
            operator: "GpuPartialAggregateExec",
        };
        let replayed =
            match replay.device_or_replayed(&item.batch, item.origin.as_deref(), |batch| {
                self.device_states(&mut probe, batch, started)
            })? {
                Ok(out) => return Ok(out),
                Err(host) => host,
            };
        // The replay counted the batch as a CPU one already.
        self.host_states(
            &mut probe,
            &replayed,
            HostRun::Cpu { counted: true },
            started,
            0,
        )
    }

    /// The partial states of one device batch (see the module docs).
    fn device_states(
        &self,
        probe: &mut SkipProbe,
        batch: &DeviceBatch,
        started: Instant,
    ) -> Result<RecordBatch> {
        if probe.skipping() {
            // Grouping does not reduce here: each row is its own state.
            let host = self.download(batch)?;
            let out = pass_through::row_states(&host, &self.keys, &self.aggregates, &self.schema)?;
            let moved = self.exec.bytes_moved(|| batch.bytes());
            self.metrics
                .record(host.num_rows(), out.num_rows(), started, moved);
            return Ok(out);
        }
        // The group table the device would build beside the batch, claimed from the
        // device budget; refused, the batch is aggregated on the CPU.
        let claim = self.plan.as_ref().and_then(|plan| {
            self.exec.claim_call(&self.metrics, || {
                crate::device_budget::table_bytes(
                    batch.num_rows(),
                    2 * plan.aggregates.len(),
                    crate::device_budget::GROUP_TABLE_SLOTS,
                )
            })
        });
        // Without a plan over device batches the host path below claims for itself.
        let mut on_device = self.plan.is_none() || claim.is_some();
        if let (Some(plan), Some(_claim)) = (&self.plan, claim) {
            let args = AggregateArgs {
                batch,
                keys: &self.keys,
                aggregates: &plan.aggregates,
            };
            match self.exec.backend.aggregate(&self.exec.stream, args) {
                Ok(result) => {
                    let out = self.assemble(plan, &result)?;
                    probe.record(batch.num_rows(), out.num_rows());
                    // What crossed: the groups' keys and words, and the sizes read back.
                    let moved = self.exec.bytes_moved(|| result.get_array_memory_size());
                    self.metrics
                        .record(batch.num_rows(), out.num_rows(), started, moved);
                    return Ok(out);
                }
                Err(EngineError::Unsupported { .. }) => {}
                // Out of device memory for the group table: the batch is still there to
                // be read back and aggregated on the CPU.
                Err(err @ EngineError::OutOfMemory { .. }) => {
                    tracing::warn!(error = %err, "device aggregate out of memory; the batch runs on the CPU");
                    self.metrics.device_errors.add(1);
                    on_device = false;
                }
                // A batch the device failed otherwise cannot be trusted to read back: the
                // caller replays it.
                Err(err) => return Err(DataFusionError::from(err)),
            }
        }
        let host = self.download(batch)?;
        if on_device {
            // Refused in place (no plan over device batches, or the backend's refusal);
            // not after running out of memory or past the budget, counted as such.
            self.metrics.refused_batches.add(1);
        }
        let moved = self.exec.bytes_moved(|| batch.bytes());
        let run = match on_device {
            true => HostRun::Backend,
            false => HostRun::Cpu { counted: false },
        };
        self.host_states(probe, &host, run, started, moved)
    }

    /// The partial states of a host batch by the host path, where `run` says; `moved`
    /// counts the bytes that brought the batch to the host.
    fn host_states(
        &self,
        probe: &mut SkipProbe,
        host: &RecordBatch,
        run: HostRun,
        started: Instant,
        moved: usize,
    ) -> Result<RecordBatch> {
        let on_device = matches!(run, HostRun::Backend);
        if probe.skipping() {
            let out = pass_through::row_states(host, &self.keys, &self.aggregates, &self.schema)?;
            self.metrics
                .record(host.num_rows(), out.num_rows(), started, moved);
            return Ok(out);
        }
        if let HostRun::Cpu { counted: false } = run {
            self.metrics.cpu_fallback_batches.add(1);
        }
        let out = self.host_run(host, on_device)?;
        probe.record(host.num_rows(), out.num_rows());
        let moved = moved
            + self
                .exec
                .bytes_moved(|| host.get_array_memory_size() + out.get_array_memory_size());
        self.metrics
            .record(host.num_rows(), out.num_rows(), started, moved);
        Ok(out)
    }

    /// The partial states of a host batch by the plan over it, on the backend where
    /// `on_device` (through the host edge, its device state claimed from the budget:
    /// the CPU's past it), on the CPU otherwise.
    fn host_run(&self, host: &RecordBatch, on_device: bool) -> Result<RecordBatch> {
        if host.num_rows() == 0 {
            return Ok(RecordBatch::new_empty(Arc::clone(&self.schema)));
        }
        let (prepared, plan) = AggregatePlan::for_host(host, &self.aggregates)?;
        let args = HostAggregateArgs {
            batch: &prepared,
            keys: &self.keys,
            aggregates: &plan.aggregates,
        };
        let aggregate = |backend: &dyn GpuBackend, stream: &DeviceStream| {
            oxidelake_device::edge::aggregate(backend, stream, args)
        };
        let result = if on_device {
            // On the device: the columns read and a group table of two words per
            // aggregate.
            let state = || {
                let mut read = self.keys.clone();
                read.extend(plan.aggregates.iter().filter_map(|a| a.input.column()));
                read.sort_unstable();
                read.dedup();
                read.iter()
                    .map(|c| prepared.column(*c).get_array_memory_size())
                    .sum::<usize>()
                    + crate::device_budget::table_bytes(
                        prepared.num_rows(),
                        2 * plan.aggregates.len(),
                        crate::device_budget::GROUP_TABLE_SLOTS,
                    )
            };
            self.exec
                .run_within_budget(&self.metrics, state, aggregate)?
        } else {
            aggregate(&self.exec.cpu, &self.exec.cpu_stream).map_err(DataFusionError::from)?
        };
        self.assemble(&plan, &result)
    }

    fn download(&self, batch: &DeviceBatch) -> Result<RecordBatch> {
        Ok(device_batch::download(
            self.exec.backend.as_ref(),
            &self.exec.stream,
            batch,
        )?)
    }

    /// The output batch from the backend's result: its key columns (a float key's
    /// `-0.0` keyed `+0.0`, see the operator's docs), then the states.
    fn assemble(&self, plan: &AggregatePlan, result: &RecordBatch) -> Result<RecordBatch> {
        let keys = self.keys.len();
        let states = state_columns(&plan.states, &self.schema, keys, &result.columns()[keys..])?;
        let mut columns: Vec<ArrayRef> = result.columns()[..keys]
            .iter()
            .map(normalize_float_zero)
            .collect();
        columns.extend(states);
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    fn spec(func: PartialFunc, column: Option<usize>) -> PartialAggSpec {
        PartialAggSpec {
            func,
            input: column.map(|column| AggInput { column, cast: None }),
        }
    }

    #[test]
    fn q1s_aggregates_share_device_work_and_integer_and_decimal_sums_go_by_halves() {
        let input = Schema::new(vec![
            Field::new("qty", DataType::Decimal128(15, 2), true),
            Field::new("price", DataType::Float64, true),
            Field::new("n", DataType::Int32, true),
        ]);
        let specs = [
            spec(PartialFunc::Sum, Some(0)),
            spec(PartialFunc::Avg, Some(0)),
            spec(PartialFunc::Max, Some(1)),
            spec(PartialFunc::Count, None),
            spec(PartialFunc::Count, Some(2)),
            spec(PartialFunc::Sum, Some(2)),
        ];
        let plan = AggregatePlan::new(&input, &specs).unwrap();
        use DeviceAggInput as I;
        let pairs: Vec<(AggFunc, I)> = plan.aggregates.iter().map(|a| (a.func, a.input)).collect();
        assert_eq!(
            pairs,
            [
                (AggFunc::Sum, I::Low32(0)),
                (AggFunc::Sum, I::High32(0)),
                (AggFunc::Count, I::Valid(0)),
                (AggFunc::Max, I::Float(1)),
                (AggFunc::Count, I::Rows),
                (AggFunc::Count, I::Valid(2)),
                (AggFunc::Sum, I::Low32(2)),
                (AggFunc::Sum, I::High32(2)),
            ],
            "AVG(qty) reuses SUM(qty)'s halves; SUM(n) goes by halves too, never wrapping"
        );
        // SUM, AVG (count and sum), MAX, COUNT(*), COUNT(n), SUM(n)
        assert_eq!(plan.states.len(), 7);
    }

    #[test]
    fn the_checked_sum_reads_the_same_halves_as_the_stock_sum_and_makes_two_state_columns() {
        let input = Schema::new(vec![Field::new("n", DataType::Int64, true)]);
        let specs = [
            spec(PartialFunc::CheckedSum, Some(0)),
            spec(PartialFunc::Sum, Some(0)),
        ];
        let plan = AggregatePlan::new(&input, &specs).unwrap();
        assert_eq!(plan.aggregates.len(), 2, "one pair of halves for both sums");
        assert!(
            matches!(&plan.states[0], StateFrom::Counted(parts) if parts == &[(0, 0), (1, 32)]),
            "{:?}",
            plan.states
        );
        assert!(
            matches!(&plan.states[1], StateFrom::Limbs(parts) if parts == &[(0, 0), (1, 32)]),
            "{:?}",
            plan.states
        );
    }

    #[test]
    fn an_aggregate_over_a_cast_keeps_the_host_path() {
        let input = Schema::new(vec![Field::new("n", DataType::Int32, true)]);
        let avg = PartialAggSpec {
            func: PartialFunc::Avg,
            input: Some(AggInput {
                column: 0,
                cast: Some(DataType::Float64),
            }),
        };
        assert!(AggregatePlan::new(&input, &[avg]).is_none());
        let wide_min = spec(PartialFunc::Min, Some(0));
        let wide = Schema::new(vec![Field::new("d", DataType::Decimal128(30, 2), true)]);
        assert!(AggregatePlan::new(&wide, &[wide_min]).is_none());
    }

    #[test]
    fn a_host_batch_gets_each_cast_and_wide_limbs_appended_once_and_the_plan_reads_them() {
        use arrow::array::{Decimal128Array, Int32Array};
        let wide = Decimal128Array::from(vec![Some(i128::from(i64::MAX) * 4), None, Some(-2)])
            .with_precision_and_scale(38, 0)
            .unwrap();
        let narrow = Decimal128Array::from(vec![1, 2, 3])
            .with_precision_and_scale(38, 0)
            .unwrap();
        let batch = RecordBatch::try_from_iter(vec![
            ("n", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            ("wide", Arc::new(wide) as ArrayRef),
            ("narrow", Arc::new(narrow) as ArrayRef),
        ])
        .unwrap();
        let avg_of_n = PartialAggSpec {
            func: PartialFunc::Avg,
            input: Some(AggInput {
                column: 0,
                cast: Some(DataType::Float64),
            }),
        };
        let specs = [
            avg_of_n.clone(),
            avg_of_n,
            spec(PartialFunc::Sum, Some(1)),
            spec(PartialFunc::CheckedSum, Some(1)),
            spec(PartialFunc::Sum, Some(2)),
        ];
        let (prepared, plan) = AggregatePlan::for_host(&batch, &specs).unwrap();
        // n, wide, narrow, then CAST(n AS Float64) once, then wide's three limbs once.
        let types: Vec<DataType> = prepared
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types[3..],
            [
                DataType::Float64,
                DataType::Int64,
                DataType::Int64,
                DataType::Int64
            ]
        );
        use DeviceAggInput as I;
        let pairs: Vec<(AggFunc, I)> = plan.aggregates.iter().map(|a| (a.func, a.input)).collect();
        assert_eq!(
            pairs,
            [
                (AggFunc::Count, I::Valid(3)),
                (AggFunc::Sum, I::Float(3)),
                (AggFunc::Sum, I::Int(4)),
                (AggFunc::Sum, I::Int(5)),
                (AggFunc::Sum, I::Low32(6)),
                (AggFunc::Sum, I::High32(6)),
                (AggFunc::Sum, I::Low32(2)),
                (AggFunc::Sum, I::High32(2)),
            ],
            "the averages share the cast; both sums of `wide` read its limbs, the top one by \
             halves; `narrow`, whose values fit 64 bits, is read as it is"
        );
        assert!(
            matches!(&plan.states[4], StateFrom::Limbs(parts)
                if parts == &[(2, 0), (3, 32), (4, 64), (5, 96)]),
            "{:?}",
            plan.states
        );
    }
}
