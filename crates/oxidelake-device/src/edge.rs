//! Host batches through the device-batch operators (ADR-0015): a host-in/host-out call
//! uploads the columns the operator reads as one [`DeviceBatch`], runs the operator
//! every device batch goes through, and brings back only what the caller needs. A GPU
//! backend has one implementation of each operator, the one over device batches; these
//! functions are its host edge.
//!
//! - The filter uploads the predicate columns and a row-number column, keeps the row
//!   numbers, and gathers the projection on the host with them (late materialisation:
//!   the projected columns never cross the bus).
//! - A computed projection uploads the columns its expressions read and brings back the
//!   computed columns alone.
//! - The partial aggregate uploads the key and the aggregated columns; its result (one
//!   row per group) is what comes back.
//!
//! A column a device batch cannot hold, or a decimal beyond 64 bits among the columns
//! read, refuses the batch with `Unsupported` before any device work or from the
//! operator, and the caller runs the batch on the CPU, as for any device refusal.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, UInt32Type};
use oxidelake_core::EngineError;

use crate::ops::validate;
use crate::ops::{
    AggFunc, AggregateArgs, AggregateResidentArgs, EvaluateArgs, EvaluateResidentArgs,
    FilterProjectArgs, Predicate, ProjectedColumn, ResidentAgg, ResidentAggInput, ValueColumn,
    output_array,
};
use crate::{DeviceStream, GpuBackend, resident};

/// The columns of `batch` at `columns`, as one batch, and the position in it of each
/// column of `batch` (`usize::MAX` for the others).
struct Narrow {
    batch: RecordBatch,
    position: Vec<usize>,
}

impl Narrow {
    fn new(batch: &RecordBatch, mut columns: Vec<usize>) -> Result<Self, EngineError> {
        columns.sort_unstable();
        columns.dedup();
        let mut position = vec![usize::MAX; batch.num_columns()];
        for (at, c) in columns.iter().enumerate() {
            position[*c] = at;
        }
        Ok(Self {
            batch: batch.project(&columns)?,
            position,
        })
    }

    fn map(&self) -> impl Fn(usize) -> usize + '_ {
        |c| self.position[c]
    }

    /// The batch with a row-number column (`UInt32`, 0..rows) after its columns.
    fn with_row_numbers(&self) -> Result<RecordBatch, EngineError> {
        let rows = self.batch.num_rows();
        let rows_u32 = u32::try_from(rows).map_err(|_| {
            EngineError::unsupported("device filter", "a batch of 2^32 rows or more")
        })?;
        let mut fields: Vec<Arc<Field>> = self.batch.schema().fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new("row", DataType::UInt32, false)));
        let mut columns = self.batch.columns().to_vec();
        columns.push(Arc::new(UInt32Array::from_iter_values(0..rows_u32)));
        Ok(RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns,
        )?)
    }
}

/// Fused filter + projection of a host batch (see the module docs).
pub(crate) fn filter_project(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    args: FilterProjectArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    validate::filter_project(&args)?;
    let projected = args.batch.project(args.projection)?;
    if args.batch.num_rows() == 0 || args.predicates.is_empty() {
        return Ok(projected);
    }
    let mut read = Vec::new();
    args.predicates.iter().for_each(|p| p.columns(&mut read));
    let narrow = Narrow::new(args.batch, read)?;
    let predicates: Vec<Predicate> = args
        .predicates
        .iter()
        .map(|p| p.with_columns(&narrow.map()))
        .collect();
    let host = narrow.with_row_numbers()?;
    let row_column = host.num_columns() - 1;
    let on_device = resident::upload(backend, stream, &host)?;
    let kept = backend.filter_project_resident(stream, &on_device, &predicates, &[row_column])?;
    let rows = resident::download_columns(backend, stream, &kept, &[0])?;
    let indices = rows
        .first()
        .and_then(|a| a.as_primitive_opt::<UInt32Type>())
        .ok_or_else(|| EngineError::Internal("the kept row numbers are not UInt32".into()))?;
    Ok(arrow::compute::take_record_batch(&projected, indices)?)
}

/// Computed columns of a host batch (see the module docs).
pub(crate) fn evaluate(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    args: EvaluateArgs<'_>,
) -> Result<Vec<ArrayRef>, EngineError> {
    if args.batch.num_rows() == 0 {
        return args
            .columns
            .iter()
            .map(|c| output_array(Vec::new(), None, &c.data_type))
            .collect();
    }
    let mut read = Vec::new();
    args.columns.iter().for_each(|c| c.expr.columns(&mut read));
    let narrow = Narrow::new(args.batch, read)?;
    let columns: Vec<ValueColumn> = args
        .columns
        .iter()
        .map(|c| ValueColumn {
            expr: c.expr.with_columns(&narrow.map()),
            data_type: c.data_type.clone(),
        })
        .collect();
    let outputs: Vec<ProjectedColumn> = (0..columns.len()).map(ProjectedColumn::Computed).collect();
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let on_device = resident::upload(backend, stream, &narrow.batch)?;
    let computed = backend.evaluate_resident(
        stream,
        EvaluateResidentArgs {
            batch: &on_device,
            columns: &columns,
            outputs: &outputs,
            schema: &schema,
        },
    )?;
    Ok(resident::download(backend, stream, &computed)?
        .columns()
        .to_vec())
}

/// Grouped partial aggregation of a host batch (see the module docs and
/// [`AggregateArgs`] for the output's layout).
pub(crate) fn aggregate(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    args: AggregateArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    validate::aggregate(&args)?;
    let schema = validate::aggregate_schema(&args)?;
    let mut read = vec![args.group_column];
    read.extend(args.aggregates.iter().map(|a| a.column));
    let narrow = Narrow::new(args.batch, read)?;
    let at = narrow.map();
    let aggregates: Vec<ResidentAgg> = args
        .aggregates
        .iter()
        .map(|spec| {
            let column = at(spec.column);
            let float = args.batch.column(spec.column).data_type() == &DataType::Float64;
            let input = match (spec.func, float) {
                (AggFunc::Count, _) => ResidentAggInput::Valid(column),
                (_, true) => ResidentAggInput::Float(column),
                (_, false) => ResidentAggInput::Int(column),
            };
            ResidentAgg {
                func: spec.func,
                input,
            }
        })
        .collect();
    let on_device = resident::upload(backend, stream, &narrow.batch)?;
    let groups = backend.aggregate_resident(
        stream,
        AggregateResidentArgs {
            batch: &on_device,
            keys: &[at(args.group_column)],
            aggregates: &aggregates,
        },
    )?;
    Ok(RecordBatch::try_new(schema, groups.columns().to_vec())?)
}
