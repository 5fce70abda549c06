//! `GpuPartialAggregateExec`'s one batch function, over segment batches in either form
//! ([`crate::segment`]).
//!
//! Where the aggregate's input hands on device batches (a GPU filter or projection
//! between transitions), the aggregate reads them in place and is itself the way back to
//! the host: its result, one row per group and batch, is all that crosses. The device
//! groups the rows by the key columns where they lie, so keys of any number and type
//! a device batch holds (strings included) need no numbering on the host.
//!
//! The aggregates map onto the device's [`Agg`]s once per operator: SUM and AVG
//! of floats, of integers and of decimals (two 32-bit halves of their images, joined
//! exactly on the host into the state the host path makes: the checked `sum`'s wrapped
//! sum and wrap count, so a group's sum that leaves its state type reaches the final
//! aggregate exactly), COUNT(*) and
//! COUNT(x), MIN / MAX of integers, dates, decimals up to 18 digits and floats. An
//! aggregate outside that (a cast the device would have to compute) makes the operator
//! refuse every device batch in place: copy it back and run the host path
//! (`refused_batches`). So does a backend that refuses the batch (CUDA for a decimal
//! column whose batch needs more than 64 bits). Host batches (the CPU backend's, a host
//! input's, or ones refused or replayed below) run the host path; a batch the device
//! fails is replayed on the CPU from its origin ([`crate::segment`]). Once grouping stops
//! reducing, batches are downloaded and pass through as their own states, as on the host
//! path.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::EngineError;
use oxidelake_device::device_batch::{self, DeviceBatch};
use oxidelake_device::ops::{Agg, AggFunc, AggInput as DeviceAggInput, AggregateArgs};

use super::keys::KeyEncoding;
use super::pass_through::{self, SkipProbe};
use super::spec::{AggInput, MAX_DEVICE_DECIMAL_PRECISION, PartialAggSpec, PartialFunc};
use super::{BatchPlan, StateFrom, state_columns};
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::SegmentBatch;
use crate::segment::replay::Replay;

/// The device aggregates of an operator and how its state columns come from them.
#[derive(Debug)]
pub(super) struct DevicePlan {
    aggregates: Vec<Agg>,
    states: Vec<StateFrom>,
}

impl DevicePlan {
    /// The plan for `aggregates` over `input`; `None` when one needs the host (a cast).
    pub(super) fn new(input: &Schema, aggregates: &[PartialAggSpec]) -> Option<Self> {
        let mut plan = Self {
            aggregates: Vec::new(),
            states: Vec::new(),
        };
        for spec in aggregates {
            let column = match &spec.input {
                None => None,
                Some(AggInput { column, cast }) => {
                    let dt = input.fields().get(*column)?.data_type();
                    if cast.as_ref().is_some_and(|to| to != dt) {
                        return None;
                    }
                    Some((*column, dt))
                }
            };
            let state = match spec.func {
                PartialFunc::Count => {
                    let input =
                        column.map_or(DeviceAggInput::Rows, |(c, _)| DeviceAggInput::Valid(c));
                    StateFrom::Result(plan.push(AggFunc::Count, input))
                }
                PartialFunc::Sum | PartialFunc::CheckedSum | PartialFunc::Avg => {
                    let (c, dt) = column?;
                    if spec.func == PartialFunc::Avg {
                        let count = plan.push(AggFunc::Count, DeviceAggInput::Valid(c));
                        plan.states.push(StateFrom::AvgCount(count));
                    }
                    let parts = match dt {
                        DataType::Float64 => {
                            vec![(plan.push(AggFunc::Sum, DeviceAggInput::Float(c)), 0)]
                        }
                        // By halves, which cannot overflow: an i64 sum of the images could.
                        DataType::Int8
                        | DataType::Int16
                        | DataType::Int32
                        | DataType::Int64
                        | DataType::Decimal128(_, _) => vec![
                            (plan.push(AggFunc::Sum, DeviceAggInput::Low32(c)), 0),
                            (plan.push(AggFunc::Sum, DeviceAggInput::High32(c)), 32),
                        ],
                        _ => return None,
                    };
                    StateFrom::of(spec.func, parts)
                }
                PartialFunc::Min | PartialFunc::Max => {
                    let (c, dt) = column?;
                    let func = if spec.func == PartialFunc::Min {
                        AggFunc::Min
                    } else {
                        AggFunc::Max
                    };
                    let input = match dt {
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
    pub(super) encoding: Arc<KeyEncoding>,
    pub(super) schema: SchemaRef,
    pub(super) plan: Option<DevicePlan>,
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
        // Without a device plan the host edge below claims for itself.
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
            // Refused in place (no device plan, or the backend's refusal); not after
            // running out of memory or past the budget, which are counted as such.
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
        let plan = BatchPlan {
            keys: &self.keys,
            aggregates: &self.aggregates,
            encoding: &self.encoding,
            schema: &self.schema,
        };
        if let HostRun::Cpu { counted: false } = run {
            self.metrics.cpu_fallback_batches.add(1);
        }
        let out = plan.run_where(&self.exec, &self.metrics, host, on_device)?;
        probe.record(host.num_rows(), out.num_rows());
        let moved = moved
            + self
                .exec
                .bytes_moved(|| host.get_array_memory_size() + out.get_array_memory_size());
        self.metrics
            .record(host.num_rows(), out.num_rows(), started, moved);
        Ok(out)
    }

    fn download(&self, batch: &DeviceBatch) -> Result<RecordBatch> {
        Ok(device_batch::download(
            self.exec.backend.as_ref(),
            &self.exec.stream,
            batch,
        )?)
    }

    /// The output batch from the device's result: its key columns, then the states.
    fn assemble(&self, plan: &DevicePlan, result: &RecordBatch) -> Result<RecordBatch> {
        let keys = self.keys.len();
        let states = state_columns(&plan.states, &self.schema, keys, &result.columns()[keys..])?;
        let mut columns: Vec<ArrayRef> = result.columns()[..keys].to_vec();
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
        let plan = DevicePlan::new(&input, &specs).unwrap();
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
        let plan = DevicePlan::new(&input, &specs).unwrap();
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
        assert!(DevicePlan::new(&input, &[avg]).is_none());
        let wide_min = spec(PartialFunc::Min, Some(0));
        let wide = Schema::new(vec![Field::new("d", DataType::Decimal128(30, 2), true)]);
        assert!(DevicePlan::new(&wide, &[wide_min]).is_none());
    }
}
