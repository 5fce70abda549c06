//! The CUDA filter over a device-resident batch (ADR-0014): the predicate program reads
//! the batch's columns where they lie, the kept rows are compacted, and the projected
//! columns are gathered into a new device batch (`gather`). Only sizes come
//! back to the host: the kept count, and each projected string column's byte total,
//! which the output's allocation needs.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};
use oxidelake_core::EngineError;

use super::gather::{gather_columns, list_flagged, string_extents};
use super::gpu::{Dev, grid, unsupported};
use super::memory::{SyncOnExit, address, alloc_on_stream, batch_pool};
use crate::device_batch::{DeviceColumn, DeviceColumns, Layout, ValueLayout};
use crate::kernels::CudaKernel;
use crate::ops::{DeviceProgram, Predicate, ValueClass};

/// Per program slot: (images, offsets, bytes, validity) addresses, 0 where the slot's
/// kind has none (a validity of 0 is "no NULLs" to the kernels). A column held as 16-byte
/// values cannot be read by the program: `Unsupported`, and the batch is refused.
fn slot_pointers(
    batch: &DeviceColumns,
    program: &DeviceProgram,
) -> Result<[Vec<u64>; 4], EngineError> {
    let memory = batch.memory();
    let mut tables: [Vec<u64>; 4] = Default::default();
    for (column, _) in &program.slots {
        let column = &batch.columns()[*column];
        let (images, offsets, bytes) = match column.values {
            ValueLayout::Images(span) => (address(memory, span.offset), 0, 0),
            ValueLayout::Strings { offsets, bytes } => (
                0,
                address(memory, offsets.offset),
                address(memory, bytes.offset),
            ),
            ValueLayout::Wide(_) => return Err(wide_column()),
        };
        let validity = column
            .validity
            .map_or(0, |span| address(memory, span.offset));
        for (table, value) in tables.iter_mut().zip([images, offsets, bytes, validity]) {
            table.push(value);
        }
    }
    Ok(tables)
}

/// The refusal of a column held as 16-byte values (a decimal beyond 64 bits).
fn wide_column() -> EngineError {
    unsupported("a device filter over a decimal column whose batch needs more than 64 bits")
}

/// See the module docs.
pub(super) fn filter_project(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    predicates: &[Predicate],
    projection: &[usize],
) -> Result<DeviceColumns, EngineError> {
    let schema = batch.schema();
    crate::ops::check_predicates(&schema, predicates)?;
    if let Some(beyond) = projection.iter().find(|i| **i >= schema.fields().len()) {
        return Err(EngineError::InvalidArgument {
            what: "projection",
            detail: format!("column {beyond} of {}", schema.fields().len()),
        });
    }
    if predicates.is_empty() {
        // The program interpreter drops every row of an empty program; the host call
        // keeps them all.
        return Err(unsupported("a device filter without predicates"));
    }
    if projection
        .iter()
        .any(|c| matches!(batch.columns()[*c].values, ValueLayout::Wide(_)))
    {
        return Err(wide_column());
    }
    let out_schema = Arc::new(schema.project(projection)?);
    let rows = batch.num_rows();
    // Kept rows are u32 indices, and the block totals u32 counts.
    u32::try_from(rows).map_err(|_| unsupported("a batch of 2^32 rows or more"))?;
    let stream = dev.stream;
    let _finished = SyncOnExit(stream);
    // A decimal column lies on the device as images only while its values fit 64 bits
    // (otherwise `slot_pointers` refuses it), so column-to-column comparisons are exact
    // (`DeviceProgram::check_column_pairs` has nothing to refuse).
    let program = DeviceProgram::compile(&schema, predicates)?;
    let slot_types: Vec<i32> = program
        .slots
        .iter()
        .map(|(_, class)| match class {
            ValueClass::Int => 0,
            ValueClass::Float => 1,
            ValueClass::Str => 2,
        })
        .collect();
    let num_instrs =
        i32::try_from(program.len()).map_err(|_| unsupported("predicate program too long"))?;
    let rows_u64 = rows as u64;

    let buffers = ProgramBuffers::upload(dev, stream, &program, &slot_types)?;
    let [images, offsets, bytes, validity] = slot_pointers(batch, &program)?;
    let image_ptrs = device_ptr_table(dev, stream, images.into_iter())?;
    let offset_ptrs = device_ptr_table(dev, stream, offsets.into_iter())?;
    let byte_ptrs = device_ptr_table(dev, stream, bytes.into_iter())?;
    let validity_ptrs = device_ptr_table(dev, stream, validity.into_iter())?;
    let mut flags: CudaSlice<u8> = stream
        .alloc_zeros(rows.max(1))
        .map_err(dev.err("cuMemAlloc"))?;

    let eval = dev
        .gpu
        .function(CudaKernel::FilterProject, "eval_predicates")?;
    let mut launch = stream.launch_builder(&eval);
    launch
        .arg(&image_ptrs)
        .arg(&offset_ptrs)
        .arg(&byte_ptrs)
        .arg(&validity_ptrs)
        .arg(&buffers.strings)
        .arg(&buffers.string_offsets)
        .arg(&buffers.types)
        .arg(&buffers.codes)
        .arg(&buffers.slots)
        .arg(&buffers.args)
        .arg(&buffers.literals)
        .arg(&num_instrs)
        .arg(&rows_u64)
        .arg(&mut flags);
    // SAFETY: eval_predicates(const u64* x4, const u8*, const int*, const int*, const int*,
    // const int*, const int*, const i64*, int, u64, u8*): the four tables hold one entry per
    // program slot, addresses inside the resident batch's allocation (written and
    // synchronised by its upload, alive while `batch` is borrowed): `rows` images of a
    // number slot, `rows + 1` offsets from 0 and their bytes of a string slot, and a
    // bitmap of ceil(rows/8) bytes or 0 (no NULLs) for each; a kernel reads only the
    // buffers of its slot's kind. The program arrays are as in `filter::filter_project`;
    // flags holds max(rows, 1) bytes and the kernel bounds rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch eval_predicates"))?;

    // The kept rows; their count sizes the output (the one readback besides each
    // projected string column's byte total).
    let (kept_rows, kept) = list_flagged(dev, &flags, rows)?;

    let extents = string_extents(dev, batch, projection, &kept_rows, kept)?;
    let mut layout = Layout::new();
    let columns: Vec<DeviceColumn> = projection
        .iter()
        .zip(&extents)
        .map(|(source, extent)| layout.column_like(&batch.columns()[*source], kept, extent.bytes))
        .collect();
    let size = layout.size();
    let memory = alloc_on_stream(dev, size)?;
    gather_columns(
        dev, batch, projection, &kept_rows, kept, &extents, &columns, &memory,
    )?;
    // The consumer reads the batch on another stream.
    stream
        .synchronize()
        .map_err(dev.err("cuStreamSynchronize"))?;
    Ok(DeviceColumns::from_parts(
        out_schema,
        kept,
        columns,
        memory,
        batch_pool(dev),
    ))
}

/// The program's arrays on the device, as eval_predicates takes them.
pub(super) struct ProgramBuffers {
    pub(super) types: CudaSlice<i32>,
    pub(super) codes: CudaSlice<i32>,
    pub(super) slots: CudaSlice<i32>,
    pub(super) args: CudaSlice<i32>,
    pub(super) literals: CudaSlice<i64>,
    pub(super) strings: CudaSlice<u8>,
    pub(super) string_offsets: CudaSlice<i32>,
}

impl ProgramBuffers {
    pub(super) fn upload(
        dev: &Dev<'_>,
        stream: &Arc<CudaStream>,
        program: &DeviceProgram,
        slot_types: &[i32],
    ) -> Result<Self, EngineError> {
        let on = Dev {
            gpu: dev.gpu,
            backend: dev.backend,
            stream,
        };
        Ok(Self {
            types: on.upload(slot_types)?,
            codes: on.upload(&program.codes)?,
            slots: on.upload(&program.slot_of)?,
            args: on.upload(&program.args)?,
            literals: on.upload(&program.literals)?,
            strings: on.upload(&program.strings)?,
            string_offsets: on.upload(&program.string_offsets)?,
        })
    }
}

/// A device array of raw device pointers (for kernels taking one pointer per column).
pub(super) fn device_ptr_table(
    dev: &Dev<'_>,
    stream: &Arc<CudaStream>,
    ptrs: impl Iterator<Item = u64>,
) -> Result<CudaSlice<u64>, EngineError> {
    let ptrs: Vec<u64> = ptrs.collect();
    let table = stream.clone_htod(&ptrs).map_err(dev.err("cuMemcpyHtoD"))?;
    super::transfers::host_to_device(std::mem::size_of_val(ptrs.as_slice()));
    Ok(table)
}
