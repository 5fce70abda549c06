//! The CUDA filter: a predicate program run by `eval_predicates` over the columns it
//! reads, then block counts, a scan and stream compaction of the kept row indices; the
//! projection is gathered on the host with those indices.
//!
//! The program's slots travel through the double-buffered pipeline chunk by chunk:
//! number columns as 8-byte images, string columns as chunk-relative `i32` offsets and
//! their bytes (dictionaries and views are first materialised as `Utf8`).
//!
//! A lane holds the uploaded program too, and its key holds the whole program, so the
//! later batches of one filter reuse both its buffers and its program from the lane
//! pool. String staging is sized to a power of two of the largest chunk's bytes, so
//! that batches of similar strings share a key (the whole staging buffer is copied:
//! at most twice a chunk's string bytes).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use arrow::buffer::NullBuffer;
use arrow::record_batch::RecordBatch;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{BLOCK, Dev, grid, one_block, unsupported};
use super::lane_pool::{LaneBytes, LaneKey, LaneState};
use super::pipeline::{self, Staging};
use crate::kernels::CudaKernel;
use crate::ops::{DeviceProgram, FilterProjectArgs, ValueClass, string_column, write_images};

/// One program slot's column, as the pipeline copies it.
enum SlotInput<'a> {
    /// Integer or float column: 8-byte images.
    Numbers(&'a ArrayRef),
    /// String column, materialised as `Utf8`.
    Strings(StringArray),
}

impl<'a> SlotInput<'a> {
    fn new(column: &'a ArrayRef, class: ValueClass) -> Result<Self, EngineError> {
        Ok(match class {
            ValueClass::Str => SlotInput::Strings(string_column(column.as_ref())?),
            _ => SlotInput::Numbers(column),
        })
    }

    fn is_string(&self) -> bool {
        matches!(self, SlotInput::Strings(_))
    }

    fn nulls(&self) -> Option<&NullBuffer> {
        match self {
            SlotInput::Numbers(c) => c.nulls(),
            SlotInput::Strings(s) => s.nulls(),
        }
    }

    /// The most string bytes any chunk of `chunk_rows` rows holds (1 for numbers).
    fn max_chunk_bytes(&self, rows: usize, chunk_rows: usize) -> usize {
        let SlotInput::Strings(s) = self else {
            return 1;
        };
        let offsets = s.value_offsets();
        (0..rows)
            .step_by(chunk_rows.max(8))
            .map(|start| {
                let end = rows.min(start + chunk_rows.max(8));
                (offsets[end] - offsets[start]) as usize
            })
            .max()
            .unwrap_or(0)
            .max(1)
    }
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

    fn device_bytes(&self) -> usize {
        self.types.num_bytes()
            + self.codes.num_bytes()
            + self.slots.num_bytes()
            + self.args.num_bytes()
            + self.literals.num_bytes()
            + self.strings.num_bytes()
            + self.string_offsets.num_bytes()
    }
}

/// Per-lane buffers of the filter pipeline.
struct FilterLane {
    program: ProgramBuffers,
    /// Per program slot: the chunk's values as 8-byte images (numbers) or as offsets
    /// and bytes (strings; a one-element placeholder for the other kind), and its
    /// validity bits.
    columns: Vec<Staging<i64>>,
    string_offsets: Vec<Staging<i32>>,
    string_bytes: Vec<Staging<u8>>,
    validity: Vec<Staging<u8>>,
    /// Device tables of the pointers above, as eval_predicates takes them.
    column_ptrs: CudaSlice<u64>,
    offset_ptrs: CudaSlice<u64>,
    byte_ptrs: CudaSlice<u64>,
    validity_ptrs: CudaSlice<u64>,
    flags: CudaSlice<u8>,
    block_counts: Staging<u32>,
    out_rows: Staging<u32>,
}

impl LaneState for FilterLane {
    fn bytes(&self) -> LaneBytes {
        let stagings: LaneBytes = self
            .columns
            .iter()
            .map(Staging::bytes)
            .chain(self.string_offsets.iter().map(Staging::bytes))
            .chain(self.string_bytes.iter().map(Staging::bytes))
            .chain(self.validity.iter().map(Staging::bytes))
            .sum::<LaneBytes>()
            + self.block_counts.bytes()
            + self.out_rows.bytes();
        let tables = self.column_ptrs.num_bytes()
            + self.offset_ptrs.num_bytes()
            + self.byte_ptrs.num_bytes()
            + self.validity_ptrs.num_bytes()
            + self.flags.num_bytes();
        stagings
            + LaneBytes {
                pinned: 0,
                device: tables + self.program.device_bytes(),
            }
    }
}

/// The lane key of a filter: lane rows, each slot's kind and string staging, and the
/// whole program (a lane holds it uploaded).
fn lane_key(
    lane_rows: usize,
    slot_types: &[i32],
    chunk_bytes: &[usize],
    program: &DeviceProgram,
) -> LaneKey {
    let mut shape = vec![lane_rows as u64, slot_types.len() as u64];
    shape.extend(slot_types.iter().map(|t| *t as u64));
    shape.extend(chunk_bytes.iter().map(|b| *b as u64));
    for part in [
        &program.codes,
        &program.slot_of,
        &program.args,
        &program.string_offsets,
    ] {
        shape.push(part.len() as u64);
        shape.extend(part.iter().map(|v| *v as u32 as u64));
    }
    shape.push(program.literals.len() as u64);
    shape.extend(program.literals.iter().map(|v| *v as u64));
    shape.push(program.strings.len() as u64);
    shape.extend(program.strings.iter().map(|b| u64::from(*b)));
    LaneKey::new("filter", shape)
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

/// Filter on the device, projection gathered on the host with the kept row indices.
///
/// The predicate columns stream through the double-buffered pipeline in chunks: per
/// chunk the device evaluates the predicates, counts and scans the kept rows per block
/// and stream-compacts their indices, and only the indices (plus the block totals) come
/// back.
pub(super) fn filter_project(
    dev: &Dev<'_>,
    args: FilterProjectArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    crate::ops::validate::filter_project(&args)?;
    let batch = args.batch;
    let rows = batch.num_rows();
    let projected = batch.project(args.projection)?;
    if rows == 0 || args.predicates.is_empty() {
        return Ok(projected);
    }
    let program = DeviceProgram::compile(&batch.schema(), args.predicates)?;
    program.check_column_pairs(batch)?;
    let inputs = program
        .slots
        .iter()
        .map(|(column, class)| SlotInput::new(batch.column(*column), *class))
        .collect::<Result<Vec<_>, _>>()?;
    // The largest chunk of string bytes per slot, so each lane's staging fits any chunk.
    let chunk_rows = dev.gpu.batching.chunk_rows;
    let chunk_bytes: Vec<usize> = inputs
        .iter()
        .map(|input| input.max_chunk_bytes(rows, chunk_rows).next_power_of_two())
        .collect();
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
    let eval = dev
        .gpu
        .function(CudaKernel::FilterProject, "eval_predicates")?;
    let count = dev.gpu.function(CudaKernel::FilterProject, "count_flags")?;
    let scan = dev
        .gpu
        .function(CudaKernel::FilterProject, "exclusive_scan_blocks")?;
    let compact = dev
        .gpu
        .function(CudaKernel::FilterProject, "compact_rows")?;
    let mut kept_rows: Vec<u32> = Vec::new();
    pipeline::double_buffered(
        dev,
        rows,
        |lane_rows| lane_key(lane_rows, &slot_types, &chunk_bytes, &program),
        |stream, lane_rows| {
            let columns = inputs
                .iter()
                .map(|i| Staging::new(dev, stream, if i.is_string() { 1 } else { lane_rows }))
                .collect::<Result<Vec<_>, _>>()?;
            let string_offsets = inputs
                .iter()
                .map(|i| Staging::new(dev, stream, if i.is_string() { lane_rows + 1 } else { 1 }))
                .collect::<Result<Vec<_>, _>>()?;
            let string_bytes = chunk_bytes
                .iter()
                .map(|bytes| Staging::new(dev, stream, *bytes))
                .collect::<Result<Vec<_>, _>>()?;
            let validity = (0..inputs.len())
                .map(|_| Staging::new(dev, stream, lane_rows.div_ceil(8)))
                .collect::<Result<Vec<_>, _>>()?;
            let column_ptrs = device_ptr_table(
                dev,
                stream,
                columns
                    .iter()
                    .map(|c: &Staging<i64>| c.device().device_ptr(stream).0),
            )?;
            let offset_ptrs = device_ptr_table(
                dev,
                stream,
                string_offsets
                    .iter()
                    .map(|c: &Staging<i32>| c.device().device_ptr(stream).0),
            )?;
            let byte_ptrs = device_ptr_table(
                dev,
                stream,
                string_bytes
                    .iter()
                    .map(|c: &Staging<u8>| c.device().device_ptr(stream).0),
            )?;
            let validity_ptrs = device_ptr_table(
                dev,
                stream,
                validity
                    .iter()
                    .map(|v: &Staging<u8>| v.device().device_ptr(stream).0),
            )?;
            Ok(FilterLane {
                program: ProgramBuffers::upload(dev, stream, &program, &slot_types)?,
                columns,
                string_offsets,
                string_bytes,
                validity,
                column_ptrs,
                offset_ptrs,
                byte_ptrs,
                validity_ptrs,
                flags: stream
                    .alloc_zeros::<u8>(lane_rows.max(1))
                    .map_err(dev.err("cuMemAlloc"))?,
                block_counts: Staging::new(dev, stream, lane_rows.div_ceil(BLOCK as usize) + 1)?,
                out_rows: Staging::new(dev, stream, lane_rows)?,
            })
        },
        |lane, stream, range| {
            let n = range.len();
            for (i, input) in inputs.iter().enumerate() {
                match input {
                    SlotInput::Numbers(values) => {
                        write_images(
                            values.as_ref(),
                            range.clone(),
                            lane.columns[i].host_mut(dev)?,
                        )?;
                        lane.columns[i].upload(dev, stream)?;
                    }
                    SlotInput::Strings(values) => {
                        let offsets = values.value_offsets();
                        let (first, last) = (offsets[range.start], offsets[range.end]);
                        let host = lane.string_offsets[i].host_mut(dev)?;
                        for (h, o) in host.iter_mut().zip(&offsets[range.start..=range.end]) {
                            *h = o - first;
                        }
                        let bytes = &values.value_data()[first as usize..last as usize];
                        lane.string_bytes[i].host_mut(dev)?[..bytes.len()].copy_from_slice(bytes);
                        lane.string_offsets[i].upload(dev, stream)?;
                        lane.string_bytes[i].upload(dev, stream)?;
                    }
                }
                pipeline::chunk_validity(input.nulls(), &range, lane.validity[i].host_mut(dev)?);
                lane.validity[i].upload(dev, stream)?;
            }
            let rows_u64 = n as u64;
            let blocks = n.div_ceil(BLOCK as usize);
            let blocks_u32 =
                u32::try_from(blocks).map_err(|_| unsupported("chunk too large for one launch"))?;
            let mut launch = stream.launch_builder(&eval);
            launch
                .arg(&lane.column_ptrs)
                .arg(&lane.offset_ptrs)
                .arg(&lane.byte_ptrs)
                .arg(&lane.validity_ptrs)
                .arg(&lane.program.strings)
                .arg(&lane.program.string_offsets)
                .arg(&lane.program.types)
                .arg(&lane.program.codes)
                .arg(&lane.program.slots)
                .arg(&lane.program.args)
                .arg(&lane.program.literals)
                .arg(&num_instrs)
                .arg(&rows_u64)
                .arg(&mut lane.flags);
            // SAFETY: eval_predicates(const u64* x4, const u8*, const int*, const int*,
            // const int*, const int*, const int*, const i64*, int, u64, u8*): the four
            // pointer tables hold one entry per program slot and address this lane's
            // buffers, all written earlier on this same stream: images (>= n values) of
            // number slots, offsets (n + 1, chunk-relative) and bytes (>= the chunk's
            // string bytes) of string slots, validity (>= ceil(n/8) bytes) of every slot;
            // a kernel reads only the buffers of its slot's kind. The pool and its offsets
            // hold every string literal an instruction names (DeviceProgram::compile);
            // the instruction arrays hold num_instrs entries whose slot indices are below
            // the slot count, and the stack depth is at most MAX_STACK; flags holds
            // lane_rows >= n bytes, and the kernel bounds rows by n.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(n)) }.map_err(dev.err("launch eval_predicates"))?;
            let mut launch = stream.launch_builder(&count);
            launch
                .arg(&lane.flags)
                .arg(&rows_u64)
                .arg(lane.block_counts.device_mut())
                .arg(&blocks_u32);
            // SAFETY: count_flags(const u8*, u64, u32*, u32): flags has >= n bytes,
            // block_counts has >= blocks + 1 entries and the kernel writes only index
            // blockIdx.x < blocks; the grid has exactly `blocks` blocks of FP_BLOCK.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(n)) }.map_err(dev.err("launch count_flags"))?;
            let mut launch = stream.launch_builder(&scan);
            launch.arg(lane.block_counts.device_mut()).arg(&blocks_u32);
            // SAFETY: exclusive_scan_blocks(u32*, u32) runs as one block of FP_BLOCK
            // threads and touches indices 0..=blocks of block_counts (>= blocks + 1).
            #[allow(unsafe_code)]
            unsafe { launch.launch(one_block()) }
                .map_err(dev.err("launch exclusive_scan_blocks"))?;
            let FilterLane {
                flags,
                block_counts,
                out_rows,
                ..
            } = lane;
            let capacity = n as u64;
            let mut launch = stream.launch_builder(&compact);
            launch
                .arg(&*flags)
                .arg(&rows_u64)
                .arg(block_counts.device())
                .arg(&blocks_u32)
                .arg(out_rows.device_mut())
                .arg(&capacity);
            // SAFETY: compact_rows(const u8*, u64, const u32*, u32, u32*, u64): out_rows
            // holds lane_rows >= n entries, at most n rows are kept, and the kernel checks
            // dst < out_capacity (= n) before every write.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(n)) }.map_err(dev.err("launch compact_rows"))?;
            block_counts.download(dev, stream, blocks + 1)?;
            // The kept count is on the device only; bring back the chunk's index
            // capacity (4 bytes a row at most) rather than stall the lane for the count.
            out_rows.download(dev, stream, n)
        },
        |lane, range| {
            let blocks = range.len().div_ceil(BLOCK as usize);
            let kept = lane
                .block_counts
                .host(dev)?
                .get(blocks)
                .copied()
                .unwrap_or(0) as usize;
            let base =
                u32::try_from(range.start).map_err(|_| unsupported("batch over 2^32 rows"))?;
            let indices = lane.out_rows.host(dev)?;
            kept_rows.extend(indices[..kept.min(indices.len())].iter().map(|r| base + r));
            Ok(())
        },
    )?;
    if kept_rows.is_empty() {
        return Ok(projected.slice(0, 0));
    }
    let indices = UInt32Array::from(kept_rows);
    let columns: Vec<ArrayRef> = projected
        .columns()
        .iter()
        .map(|c| arrow::compute::take(c.as_ref(), &indices, None))
        .collect::<Result<_, _>>()?;
    Ok(RecordBatch::try_new(projected.schema(), columns)?)
}
