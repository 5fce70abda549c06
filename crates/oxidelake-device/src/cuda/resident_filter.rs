//! The CUDA filter over a device-resident batch (ADR-0014): the predicate program reads
//! the batch's columns where they lie, the kept rows are compacted, and the projected
//! columns are gathered into a new resident batch. Only the kept count comes back to the
//! host (to size the output).
//!
//! Covered: projected columns held as images without NULLs (numbers, dates, decimals of
//! at most 18 digits). A projected string column, or one with NULLs, is `Unsupported`
//! until the device can gather strings and validity bitmaps; the operator then bridges
//! that batch through the host call. Predicates may read every resident column.

use std::sync::Arc;

use arrow::datatypes::Schema;
use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use oxidelake_core::EngineError;

use super::filter::{ProgramBuffers, device_ptr_table};
use super::launch::{BLOCK, Dev, grid, unsupported};
use crate::DeviceBuffer;
use crate::handles::DeviceMem;
use crate::kernels::CudaKernel;
use crate::ops::{DeviceProgram, Predicate, ValueClass};
use crate::resident::{DeviceBatch, Layout, ResidentColumn, ResidentValues};

/// The device address of byte `offset` of `memory`.
fn address(memory: &DeviceBuffer, offset: usize) -> u64 {
    (memory.address() + offset) as u64
}

/// Per program slot: (images, offsets, bytes, validity) addresses, 0 where the slot's
/// kind has none (a validity of 0 is "no NULLs" to the kernels).
fn slot_pointers(batch: &DeviceBatch, program: &DeviceProgram) -> [Vec<u64>; 4] {
    let memory = batch.memory();
    let mut tables: [Vec<u64>; 4] = Default::default();
    for (column, _) in &program.slots {
        let column = &batch.columns()[*column];
        let (images, offsets, bytes) = match column.values {
            ResidentValues::Images(span) => (address(memory, span.offset), 0, 0),
            ResidentValues::Strings { offsets, bytes } => (
                0,
                address(memory, offsets.offset),
                address(memory, bytes.offset),
            ),
        };
        let validity = column
            .validity
            .map_or(0, |span| address(memory, span.offset));
        for (table, value) in tables.iter_mut().zip([images, offsets, bytes, validity]) {
            table.push(value);
        }
    }
    tables
}

/// The output columns' layouts for `kept` rows, or `Unsupported` for a column the device
/// cannot gather yet.
fn output_columns(
    batch: &DeviceBatch,
    projection: &[usize],
    kept: usize,
    layout: &mut Layout,
) -> Result<Vec<ResidentColumn>, EngineError> {
    projection
        .iter()
        .map(|i| {
            let column = &batch.columns()[*i];
            match column.values {
                ResidentValues::Images(_) if column.validity.is_none() => Ok(ResidentColumn {
                    data_type: column.data_type.clone(),
                    values: ResidentValues::Images(layout.take(kept * 8)),
                    validity: None,
                    null_count: 0,
                }),
                ResidentValues::Images(_) => Err(unsupported(
                    "gathering a resident column with NULLs on the device",
                )),
                ResidentValues::Strings { .. } => Err(unsupported(
                    "gathering a resident string column on the device",
                )),
            }
        })
        .collect()
}

/// See the module docs.
pub(super) fn filter_project_resident(
    dev: &Dev<'_>,
    batch: &DeviceBatch,
    predicates: &[Predicate],
    projection: &[usize],
) -> Result<DeviceBatch, EngineError> {
    let schema = batch.schema();
    crate::ops::check_predicates(&schema, predicates)?;
    if let Some(beyond) = projection.iter().find(|i| **i >= schema.fields().len()) {
        return Err(EngineError::InvalidArgument {
            what: "projection",
            detail: format!("column {beyond} of {}", schema.fields().len()),
        });
    }
    let out_schema = Arc::new(schema.project(projection)?);
    // Refuse what cannot be gathered before any device work.
    output_columns(batch, projection, 0, &mut Layout::new())?;
    let rows = batch.num_rows();
    let stream = dev.stream;
    // Wide decimals never live on a device, so column-to-column comparisons are exact
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
    let blocks = rows.div_ceil(BLOCK as usize).max(1);
    let blocks_u32 =
        u32::try_from(blocks).map_err(|_| unsupported("batch too large for one launch"))?;
    let rows_u64 = rows as u64;

    let buffers = ProgramBuffers::upload(dev, stream, &program, &slot_types)?;
    let [images, offsets, bytes, validity] = slot_pointers(batch, &program);
    let image_ptrs = device_ptr_table(dev, stream, images.into_iter())?;
    let offset_ptrs = device_ptr_table(dev, stream, offsets.into_iter())?;
    let byte_ptrs = device_ptr_table(dev, stream, bytes.into_iter())?;
    let validity_ptrs = device_ptr_table(dev, stream, validity.into_iter())?;
    let mut flags: CudaSlice<u8> = stream
        .alloc_zeros(rows.max(1))
        .map_err(dev.err("cuMemAlloc"))?;
    let mut block_counts: CudaSlice<u32> = stream
        .alloc_zeros(blocks + 1)
        .map_err(dev.err("cuMemAlloc"))?;
    let mut kept_rows: CudaSlice<u32> = stream
        .alloc_zeros(rows.max(1))
        .map_err(dev.err("cuMemAlloc"))?;

    let eval = dev
        .backend
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

    let count = dev
        .backend
        .function(CudaKernel::FilterProject, "count_flags")?;
    let mut launch = stream.launch_builder(&count);
    launch
        .arg(&flags)
        .arg(&rows_u64)
        .arg(&mut block_counts)
        .arg(&blocks_u32);
    // SAFETY: count_flags(const u8*, u64, u32*, u32): flags has >= rows bytes,
    // block_counts blocks + 1 entries, and the grid has `blocks` blocks.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch count_flags"))?;
    let scan = dev
        .backend
        .function(CudaKernel::FilterProject, "exclusive_scan_blocks")?;
    let mut launch = stream.launch_builder(&scan);
    launch.arg(&mut block_counts).arg(&blocks_u32);
    // SAFETY: exclusive_scan_blocks(u32*, u32) runs as one block and touches indices
    // 0..=blocks of block_counts (blocks + 1 entries).
    #[allow(unsafe_code)]
    unsafe {
        launch.launch(LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map_err(dev.err("launch exclusive_scan_blocks"))?;
    let compact = dev
        .backend
        .function(CudaKernel::FilterProject, "compact_rows")?;
    let capacity = rows as u64;
    let mut launch = stream.launch_builder(&compact);
    launch
        .arg(&flags)
        .arg(&rows_u64)
        .arg(&block_counts)
        .arg(&blocks_u32)
        .arg(&mut kept_rows)
        .arg(&capacity);
    // SAFETY: compact_rows(const u8*, u64, const u32*, u32, u32*, u64): kept_rows holds
    // max(rows, 1) entries and the kernel checks each destination against `capacity`.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch compact_rows"))?;

    // The only readback: the kept count, the last entry of the scanned block totals.
    let totals = stream
        .clone_dtoh(&block_counts.slice(blocks..blocks + 1))
        .map_err(dev.err("cuMemcpyDtoH"))?;
    super::transfers::device_to_host(4);
    let kept = totals.first().copied().unwrap_or(0) as usize;

    let mut layout = Layout::new();
    let columns = output_columns(batch, projection, kept, &mut layout)?;
    let size = layout.size();
    let slice = stream
        .alloc_zeros::<u8>(size)
        .map_err(dev.err("cuMemAlloc"))?;
    let base = {
        let (ptr, _sync) = slice.device_ptr(stream);
        ptr
    };
    let memory = DeviceBuffer {
        device: dev.backend.device,
        len_bytes: size,
        address: usize::try_from(base).unwrap_or(usize::MAX),
        mem: DeviceMem::Cuda(slice),
    };
    if kept > 0 {
        let gather = dev
            .backend
            .function(CudaKernel::FilterProject, "gather_8byte")?;
        let mut scratch_valid: CudaSlice<u8> =
            stream.alloc_zeros(kept).map_err(dev.err("cuMemAlloc"))?;
        let kept_u64 = kept as u64;
        for (source, out) in projection.iter().zip(&columns) {
            let (ResidentValues::Images(from), ResidentValues::Images(to)) =
                (batch.columns()[*source].values, out.values)
            else {
                return Err(EngineError::Internal(
                    "resident gather of a column that is not images".into(),
                ));
            };
            let values = address(batch.memory(), from.offset);
            let no_validity = 0u64;
            let out_values = address(&memory, to.offset);
            let mut launch = stream.launch_builder(&gather);
            launch
                .arg(&values)
                .arg(&no_validity)
                .arg(&rows_u64)
                .arg(&kept_rows)
                .arg(&kept_u64)
                .arg(&out_values)
                .arg(&mut scratch_valid);
            // SAFETY: gather_8byte(const i64*, const u8*, u64, const u32*, u64, i64*, u8*):
            // `values` addresses `rows` images of the input batch, the validity pointer
            // is 0 (no NULLs: the kernel treats every row as valid), kept_rows holds at
            // least `kept` indices below `rows` (compact_rows wrote them in order),
            // `out_values` addresses `kept` images inside the output allocation (its
            // span from `output_columns`), and scratch_valid holds `kept` bytes.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(kept)) }.map_err(dev.err("launch gather_8byte"))?;
        }
    }
    // The consumer reads the batch on another stream.
    stream
        .synchronize()
        .map_err(dev.err("cuStreamSynchronize"))?;
    let schema_ref: Arc<Schema> = out_schema;
    Ok(DeviceBatch::from_parts(
        schema_ref, kept, columns, memory, size,
    ))
}
