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
//! - The partial aggregate uploads the key columns and the aggregated ones (a column
//!   that is only counted as its validity alone); its result (one row per group) is what
//!   comes back.
//! - A join's build uploads its keys and gets the table; a probe uploads its keys and
//!   runs the backend's one join over them, whose output is each pair's build row and
//!   probe row (or a semi or anti join's probe rows): only row numbers come back.
//!
//! On a backend that keeps its batches on the host (the CPU backend) nothing crosses:
//! the batch is wrapped as it is (`DeviceBatch::host`), and the filter runs over the
//! whole batch rather than over row numbers.
//!
//! A column a device batch cannot hold, or a decimal beyond 64 bits among the columns
//! read, refuses the batch with `Unsupported` before any device work or from the
//! operator, and the caller runs the batch on the CPU, as for any device refusal.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow::datatypes::{DataType, Field, Schema, UInt32Type};
use oxidelake_core::EngineError;

use crate::ops::validate;
use crate::ops::{
    Agg, AggInput, AggregateArgs, EvaluateArgs, HostAggregateArgs, HostEvaluateArgs,
    HostFilterArgs, JoinArgs, JoinColumn, JoinKey, JoinMatches, Predicate, ProbeRows,
    ProjectedColumn, ValueColumn, check_value_column, output_array,
};
use crate::{DeviceBatch, DeviceStream, GpuBackend, JoinTable, device_batch};

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
pub fn filter_project(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    args: HostFilterArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    if backend.keeps_batches_on_host() {
        // The backend's filter checks the arguments and runs over the whole batch.
        let whole = DeviceBatch::host(args.batch.clone());
        let kept = backend.filter_project(stream, &whole, args.predicates, args.projection)?;
        return device_batch::download(backend, stream, &kept);
    }
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
    let on_device = device_batch::upload(backend, stream, &host)?;
    let kept = backend.filter_project(stream, &on_device, &predicates, &[row_column])?;
    let rows = device_batch::download_columns(backend, stream, &kept, &[0])?;
    let indices = rows
        .first()
        .and_then(|a| a.as_primitive_opt::<UInt32Type>())
        .ok_or_else(|| EngineError::Internal("the kept row numbers are not UInt32".into()))?;
    Ok(arrow::compute::take_record_batch(&projected, indices)?)
}

/// Computed columns of a host batch (see the module docs).
pub fn evaluate(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    args: HostEvaluateArgs<'_>,
) -> Result<Vec<ArrayRef>, EngineError> {
    if args.batch.num_rows() == 0 {
        return args
            .columns
            .iter()
            .map(|c| output_array(Vec::new(), None, &c.data_type))
            .collect();
    }
    let schema = args.batch.schema();
    for column in args.columns {
        check_value_column(&schema, column)?;
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
    let on_device = device_batch::upload(backend, stream, &narrow.batch)?;
    let computed = backend.evaluate(
        stream,
        EvaluateArgs {
            batch: &on_device,
            columns: &columns,
            outputs: &outputs,
            schema: &schema,
        },
    )?;
    Ok(device_batch::download(backend, stream, &computed)?
        .columns()
        .to_vec())
}

/// Grouped partial aggregation of a host batch (see the module docs; the result is
/// [`AggregateArgs`]'s).
pub fn aggregate(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    args: HostAggregateArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    if backend.keeps_batches_on_host() {
        let whole = DeviceBatch::host(args.batch.clone());
        return backend.aggregate(
            stream,
            AggregateArgs {
                batch: &whole,
                keys: args.keys,
                aggregates: args.aggregates,
            },
        );
    }
    crate::ops::check_aggregates(args.batch.num_columns(), args.keys, args.aggregates)?;
    let mut read = args.keys.to_vec();
    read.extend(args.aggregates.iter().filter_map(|a| a.input.column()));
    let mut narrow = Narrow::new(args.batch, read)?;
    // A column that is only counted crosses as its validity: Int64 zeros with its NULLs.
    let counted_only = |c: usize| {
        !args.keys.contains(&c)
            && args
                .aggregates
                .iter()
                .all(|a| a.input.column() != Some(c) || matches!(a.input, AggInput::Valid(_)))
    };
    let mut columns = narrow.batch.columns().to_vec();
    let mut fields: Vec<Arc<Field>> = narrow.batch.schema().fields().iter().cloned().collect();
    for (c, at) in narrow.position.iter().enumerate() {
        if *at != usize::MAX && counted_only(c) && columns[*at].data_type() != &DataType::Int64 {
            let rows = args.batch.num_rows();
            let nulls = args.batch.column(c).logical_nulls();
            columns[*at] = Arc::new(Int64Array::new(vec![0i64; rows].into(), nulls));
            fields[*at] = Arc::new(Field::new(fields[*at].name(), DataType::Int64, true));
        }
    }
    narrow.batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(args.batch.num_rows())),
    )?;
    let at = narrow.map();
    let keys: Vec<usize> = args.keys.iter().map(|k| at(*k)).collect();
    let aggregates: Vec<Agg> = args
        .aggregates
        .iter()
        .map(|agg| Agg {
            func: agg.func,
            input: agg.input.with_column(&at),
        })
        .collect();
    let on_device = device_batch::upload(backend, stream, &narrow.batch)?;
    backend.aggregate(
        stream,
        AggregateArgs {
            batch: &on_device,
            keys: &keys,
            aggregates: &aggregates,
        },
    )
}

/// A join table over host Int64 keys (NULL keys never join).
pub fn build_join_table(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    keys: &Int64Array,
) -> Result<JoinTable, EngineError> {
    let host = RecordBatch::try_from_iter(vec![("key", Arc::new(keys.clone()) as ArrayRef)])?;
    let batch = device_batch::upload(backend, stream, &host)?;
    backend.build_join_table(stream, &batch, JoinKey::Column(0))
}

/// Probes `table` with host Int64 keys through the backend's join, whose output is the
/// rows' numbers: each matched pair's build row and probe row, or for a semi or anti
/// join (`rows`) the probe rows it keeps and no build rows.
pub fn probe_join_table(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    table: &JoinTable,
    keys: &Int64Array,
    rows: ProbeRows,
) -> Result<JoinMatches, EngineError> {
    let host = RecordBatch::try_from_iter(vec![("key", Arc::new(keys.clone()) as ArrayRef)])?;
    let probe = device_batch::upload(backend, stream, &host)?;
    let field = |name: &str| Field::new(name, DataType::UInt32, false);
    let (output, schema): (&[JoinColumn], _) = match rows {
        ProbeRows::Pairs => (
            &[JoinColumn::BuildRow, JoinColumn::ProbeRow],
            Schema::new(vec![field("build"), field("probe")]),
        ),
        _ => (&[JoinColumn::ProbeRow], Schema::new(vec![field("probe")])),
    };
    let args = JoinArgs {
        build: None,
        probe: &probe,
        key: JoinKey::Column(0),
        output,
        rows,
        schema: Arc::new(schema),
    };
    let joined = backend.join(stream, table, args)?;
    let joined = device_batch::download(backend, stream, &joined)?;
    let column = |i: usize| {
        joined
            .column(i)
            .as_primitive_opt::<UInt32Type>()
            .cloned()
            .ok_or_else(|| EngineError::Internal("a join's row numbers are not UInt32".into()))
    };
    Ok(match rows {
        ProbeRows::Pairs => JoinMatches {
            build_indices: column(0)?,
            probe_indices: column(1)?,
        },
        _ => JoinMatches {
            build_indices: UInt32Array::from(Vec::<u32>::new()),
            probe_indices: column(0)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuBackend, DeviceMemory};

    #[test]
    fn a_probe_of_host_keys_brings_back_pairs_in_probe_order_or_the_rows_a_semi_or_anti_join_keeps()
    {
        let backend = CpuBackend::new();
        let stream = backend.create_stream().unwrap();
        let build = Int64Array::from(vec![Some(1), Some(2), Some(1), None]);
        let table = build_join_table(&backend, &stream, &build).unwrap();
        let probe = Int64Array::from(vec![Some(1), None, Some(3), Some(2)]);
        let probed =
            |keys: &Int64Array, rows| probe_join_table(&backend, &stream, &table, keys, rows);
        let pairs = probed(&probe, ProbeRows::Pairs).unwrap();
        assert_eq!(pairs.build_indices.values().to_vec(), vec![0, 2, 1]);
        assert_eq!(pairs.probe_indices.values().to_vec(), vec![0, 0, 3]);
        let semi = probed(&probe, ProbeRows::Matched).unwrap();
        assert!(semi.build_indices.is_empty());
        assert_eq!(semi.probe_indices.values().to_vec(), vec![0, 3]);
        let anti = probed(&probe, ProbeRows::Unmatched).unwrap();
        assert_eq!(
            anti.probe_indices.values().to_vec(),
            vec![1, 2],
            "the NULL key and the key the build side lacks"
        );
        let empty = probed(&Int64Array::from(Vec::<i64>::new()), ProbeRows::Pairs).unwrap();
        assert!(empty.probe_indices.is_empty() && empty.build_indices.is_empty());
        // A build column asked for without the build batch is refused.
        let keys = RecordBatch::try_from_iter(vec![("key", Arc::new(probe) as ArrayRef)]).unwrap();
        let args = JoinArgs {
            build: None,
            probe: &DeviceBatch::host(keys),
            key: JoinKey::Column(0),
            output: &[JoinColumn::Build(0)],
            rows: ProbeRows::Pairs,
            schema: Arc::new(Schema::new(vec![Field::new("b", DataType::Int64, true)])),
        };
        assert!(backend.join(&stream, &table, args).is_err());
    }
}
