//! Computed columns on CUDA: the operand columns' images and validity are uploaded once
//! per batch, then `eval_values` runs each column's program (one thread per row) and the
//! values, validity bytes and the overflow flag come back.
//!
//! Not pipelined: a computed column reads whole columns and writes one, so the batch
//! moves in one copy each way (the filter's double-buffered chunks pay off when most of
//! a batch is dropped; here nothing is).

use arrow::array::{Array, ArrayRef};
use arrow::buffer::NullBuffer;
use cudarc::driver::{CudaSlice, DevicePtr, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{Dev, grid, unsupported};
use crate::kernels::CudaKernel;
use crate::ops::{EvaluateArgs, ValueProgram, load_images, output_array, overflow_error};

/// The kernel's flag bit for a malformed program (stack under- or overflow).
pub(super) const BAD_PROGRAM: u32 = 2;

pub(super) fn evaluate(
    dev: &Dev<'_>,
    args: EvaluateArgs<'_>,
) -> Result<Vec<ArrayRef>, EngineError> {
    let batch = args.batch;
    let rows = batch.num_rows();
    let schema = batch.schema();
    let mut slots = Vec::new();
    let programs = args
        .columns
        .iter()
        .map(|c| ValueProgram::compile(&schema, c, &mut slots))
        .collect::<Result<Vec<_>, _>>()?;
    if rows == 0 {
        return args
            .columns
            .iter()
            .map(|c| output_array(Vec::new(), None, &c.data_type))
            .collect();
    }
    let rows_u64 = rows as u64;
    // Operand images and validity, staged once for every program.
    let mut images: Vec<CudaSlice<i64>> = Vec::with_capacity(slots.len());
    let mut validity: Vec<Option<CudaSlice<u8>>> = Vec::with_capacity(slots.len());
    for column in &slots {
        let array = batch.column(*column);
        images.push(dev.upload(&load_images(array.as_ref())?)?);
        let nulls = array.logical_nulls().filter(|n| n.null_count() > 0);
        validity.push(match nulls {
            Some(n) => Some(dev.validity(Some(&n), rows)?),
            None => None,
        });
    }
    let column_ptrs: Vec<u64> = images.iter().map(|c| c.device_ptr(dev.stream).0).collect();
    // A zero pointer means "no NULLs" to the kernel's bit_is_set.
    let validity_ptrs: Vec<u64> = validity
        .iter()
        .map(|v| v.as_ref().map_or(0, |v| v.device_ptr(dev.stream).0))
        .collect();
    let (d_columns, d_validity) = (dev.upload(&column_ptrs)?, dev.upload(&validity_ptrs)?);
    let kernel = dev.gpu.function(CudaKernel::FilterProject, "eval_values")?;
    let mut out = Vec::with_capacity(programs.len());
    for (program, column) in programs.iter().zip(args.columns) {
        let (d_codes, d_slots, d_args, d_lits) = (
            dev.upload(&program.codes)?,
            dev.upload(&program.slot_of)?,
            dev.upload(&program.args)?,
            dev.upload(&program.literals)?,
        );
        let num_instrs =
            i32::try_from(program.len()).map_err(|_| unsupported("value program too long"))?;
        let mut values = dev.zeros::<i64>(rows)?;
        let mut valid = dev.zeros::<u8>(rows)?;
        let mut flag = dev.zeros::<u32>(1)?;
        let mut launch = dev.stream.launch_builder(&kernel);
        launch
            .arg(&d_columns)
            .arg(&d_validity)
            .arg(&d_codes)
            .arg(&d_slots)
            .arg(&d_args)
            .arg(&d_lits)
            .arg(&num_instrs)
            .arg(&rows_u64)
            .arg(&mut values)
            .arg(&mut valid)
            .arg(&mut flag);
        // SAFETY: eval_values(const u64*, const u64*, const int* x3, const i64*, int, u64,
        // i64*, u8*, u32*): the two pointer tables hold one entry per program slot (every
        // program of the batch shares `slots`), addressing the images (`rows` values) and
        // the packed validity (ceil(rows / 8) bytes, or 0 for none) uploaded above on this
        // stream; the instruction arrays hold num_instrs entries whose slot indices are
        // below the slot count (ValueProgram::compile), the kernel bounds its stack by
        // MAX_VALUE_STACK, values and valid hold `rows` entries, flag one, and the kernel
        // bounds rows by `rows`.
        #[allow(unsafe_code)]
        unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch eval_values"))?;
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
        let values = dev.download(&values)?;
        let valid = dev.download(&valid)?;
        let nulls = NullBuffer::from(valid.iter().map(|v| *v != 0).collect::<Vec<bool>>());
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        out.push(output_array(values, nulls, &column.data_type)?);
    }
    Ok(out)
}
