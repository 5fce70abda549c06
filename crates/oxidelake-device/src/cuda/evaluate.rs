//! Computed columns over a device-resident batch on CUDA (ADR-0014): `eval_values` reads
//! the operand columns' images and validity where they lie in the input batch and writes
//! each computed column's images straight into the output batch; `pack_bits` turns its
//! validity bytes into the output's bitmap. Passed-through columns are copied from
//! device to device. The one readback is the overflow flag that all programs share
//! (4 bytes): a value needing more than 64 bits fails the batch with an overflow, and
//! the operator computes that batch on the host with DataFusion's 128-bit decimals.

use cudarc::driver::{CudaSlice, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{Dev, grid, unsupported};
use super::memory::{SyncOnExit, address, alloc_on_stream, batch_pool, copy_span};
use crate::device_batch::{DeviceColumn, DeviceColumns, Layout, ValueLayout};
use crate::kernels::CudaKernel;
use crate::ops::{EvaluateArgs, ProjectedColumn, ValueProgram, overflow_error};

/// The kernel's flag bit for a malformed program (stack under- or overflow).
const BAD_PROGRAM: u32 = 2;

/// The output column `output` lays out in `layout` for a batch of `rows` rows.
fn output_column(
    batch: &DeviceColumns,
    args: &EvaluateArgs<'_>,
    position: usize,
    output: ProjectedColumn,
    rows: usize,
    layout: &mut Layout,
) -> Result<DeviceColumn, EngineError> {
    let data_type = args.schema.field(position).data_type().clone();
    match output {
        ProjectedColumn::Input(i) => {
            let input = &batch.columns()[i];
            let string_bytes = match input.values {
                ValueLayout::Strings { bytes, .. } => bytes.len,
                _ => 0,
            };
            Ok(DeviceColumn {
                data_type,
                ..layout.column_like(input, rows, string_bytes)
            })
        }
        ProjectedColumn::Computed(k) => {
            if args.columns[k].data_type != data_type {
                return Err(EngineError::InvalidArgument {
                    what: "device projection",
                    detail: format!(
                        "computed column {k} is {}, its output field {data_type}",
                        args.columns[k].data_type
                    ),
                });
            }
            // A computed value may be NULL without a NULL operand (the year of a day
            // outside the calendar's range), so every computed column has a bitmap; a
            // download drops one without an unset bit.
            Ok(DeviceColumn {
                data_type,
                values: ValueLayout::Images(layout.take(rows * 8)),
                validity: Some(layout.take(rows.div_ceil(8))),
            })
        }
    }
}

/// Checks `args`' outputs against the batch, the computed columns and the schema.
fn check_outputs(batch: &DeviceColumns, args: &EvaluateArgs<'_>) -> Result<(), EngineError> {
    if args.outputs.len() != args.schema.fields().len() {
        return Err(EngineError::InvalidArgument {
            what: "device projection",
            detail: format!(
                "{} outputs for {} fields",
                args.outputs.len(),
                args.schema.fields().len()
            ),
        });
    }
    let inputs = batch.columns().len();
    let computed = args.columns.len();
    for output in args.outputs {
        let (index, bound, what) = match output {
            ProjectedColumn::Input(i) => (*i, inputs, "input column"),
            ProjectedColumn::Computed(k) => (*k, computed, "computed column"),
        };
        if index >= bound {
            return Err(EngineError::InvalidArgument {
                what: "device projection",
                detail: format!("{what} {index} of {bound}"),
            });
        }
    }
    Ok(())
}

/// See the module docs.
pub(super) fn evaluate(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    args: EvaluateArgs<'_>,
) -> Result<DeviceColumns, EngineError> {
    check_outputs(batch, &args)?;
    let in_schema = batch.schema();
    let rows = batch.num_rows();
    let mut slots = Vec::new();
    let programs = args
        .columns
        .iter()
        .map(|c| ValueProgram::compile(&in_schema, c, &mut slots))
        .collect::<Result<Vec<_>, _>>()?;
    // The programs read 8-byte images: a string operand is not a value program's, and
    // a decimal held as 16-byte values needs the host's 128-bit arithmetic.
    let mut image_ptrs = Vec::with_capacity(slots.len());
    let mut validity_ptrs = Vec::with_capacity(slots.len());
    for slot in &slots {
        let column = &batch.columns()[*slot];
        let ValueLayout::Images(span) = column.values else {
            return Err(unsupported(
                "a computed column over a device column that is not held as 8-byte images",
            ));
        };
        image_ptrs.push(address(batch.memory(), span.offset));
        // A zero pointer means "no NULLs" to the kernel's bit_is_set.
        validity_ptrs.push(
            column
                .validity
                .map_or(0, |span| address(batch.memory(), span.offset)),
        );
    }
    let mut layout = Layout::new();
    let columns = args
        .outputs
        .iter()
        .enumerate()
        .map(|(position, output)| output_column(batch, &args, position, *output, rows, &mut layout))
        .collect::<Result<Vec<_>, _>>()?;
    let size = layout.size();
    let stream = dev.stream;
    let _finished = SyncOnExit(stream);
    let mut memory = alloc_on_stream(dev, size)?;

    for (output, out) in args.outputs.iter().zip(&columns) {
        let ProjectedColumn::Input(i) = output else {
            continue;
        };
        let input = &batch.columns()[*i];
        match (input.values, out.values) {
            (ValueLayout::Images(from), ValueLayout::Images(to))
            | (ValueLayout::Wide(from), ValueLayout::Wide(to)) => {
                copy_span(dev, batch.memory(), from, &mut memory, to)?;
            }
            (
                ValueLayout::Strings { offsets, bytes },
                ValueLayout::Strings {
                    offsets: to_offsets,
                    bytes: to_bytes,
                },
            ) => {
                copy_span(dev, batch.memory(), offsets, &mut memory, to_offsets)?;
                copy_span(dev, batch.memory(), bytes, &mut memory, to_bytes)?;
            }
            _ => {
                return Err(EngineError::Internal(
                    "device projection: column layouts disagree".into(),
                ));
            }
        }
        if let (Some(from), Some(to)) = (input.validity, out.validity) {
            copy_span(dev, batch.memory(), from, &mut memory, to)?;
        }
    }

    if rows > 0 && !programs.is_empty() {
        let rows_u64 = rows as u64;
        let (d_columns, d_validity) = (dev.upload(&image_ptrs)?, dev.upload(&validity_ptrs)?);
        let eval = dev.gpu.function(CudaKernel::FilterProject, "eval_values")?;
        let pack = dev.gpu.function(CudaKernel::FilterProject, "pack_bits")?;
        let mut valid: CudaSlice<u8> = dev.zeros(rows)?;
        let mut flag: CudaSlice<u32> = dev.zeros(1)?;
        // Kept alive until the stream is synchronised: the launches read them.
        let mut uploads = Vec::with_capacity(programs.len());
        for (output, out) in args.outputs.iter().zip(&columns) {
            let ProjectedColumn::Computed(k) = output else {
                continue;
            };
            let (ValueLayout::Images(values), Some(bits)) = (out.values, out.validity) else {
                return Err(EngineError::Internal(
                    "device projection: a computed column without images and bitmap".into(),
                ));
            };
            let program = &programs[*k];
            let codes = (
                dev.upload(&program.codes)?,
                dev.upload(&program.slot_of)?,
                dev.upload(&program.args)?,
                dev.upload(&program.literals)?,
            );
            let num_instrs =
                i32::try_from(program.len()).map_err(|_| unsupported("value program too long"))?;
            let out_values = address(&memory, values.offset);
            let out_bits = address(&memory, bits.offset);
            let mut launch = stream.launch_builder(&eval);
            launch
                .arg(&d_columns)
                .arg(&d_validity)
                .arg(&codes.0)
                .arg(&codes.1)
                .arg(&codes.2)
                .arg(&codes.3)
                .arg(&num_instrs)
                .arg(&rows_u64)
                .arg(&out_values)
                .arg(&mut valid)
                .arg(&mut flag);
            // SAFETY: eval_values(const u64*, const u64*, const int* x3, const i64*, int,
            // u64, i64*, u8*, u32*): the two tables hold one entry per program slot (all
            // programs share `slots`), addresses inside the input batch's allocation
            // (alive while `batch` is borrowed, and `_finished` waits for the stream
            // before this function returns): `rows` 8-byte images each, and a bitmap of
            // ceil(rows/8) bytes or 0 (no NULLs); the instruction arrays hold num_instrs
            // entries whose slot indices are below the slot count (ValueProgram::compile),
            // the kernel bounds its stack by MAX_VALUE_STACK; `out_values` addresses this
            // column's span of rows * 8 bytes in the output allocation (`output_column`),
            // valid holds max(rows, 1) bytes, flag one entry; the kernel bounds rows.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch eval_values"))?;
            let mut launch = stream.launch_builder(&pack);
            launch.arg(&valid).arg(&rows_u64).arg(&out_bits);
            // SAFETY: pack_bits(const u8*, u64, u8*): valid holds `rows` flags written by
            // the launch above on this stream; `out_bits` addresses this column's
            // bitmap span of ceil(rows/8) bytes; one thread per output byte, bounded by
            // rows.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(rows.div_ceil(8))) }
                .map_err(dev.err("launch pack_bits"))?;
            uploads.push(codes);
        }
        let flag = dev.download(&flag)?;
        match flag.first().copied().unwrap_or(0) {
            0 => {}
            f if f & BAD_PROGRAM != 0 => {
                return Err(EngineError::Internal(
                    "eval_values found a malformed value program".into(),
                ));
            }
            _ => return Err(overflow_error()),
        }
    }
    // The consumer reads the batch on another stream.
    stream
        .synchronize()
        .map_err(dev.err("cuStreamSynchronize"))?;
    Ok(DeviceColumns::from_parts(
        std::sync::Arc::clone(args.schema),
        rows,
        columns,
        memory,
        batch_pool(dev),
    ))
}
