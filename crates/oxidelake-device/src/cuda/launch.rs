//! The CUDA operator paths: upload the columns a kernel needs, launch the kernels of
//! `kernels/cuda/*.cu`, download the results, and hand Arrow arrays back.
//!
//! Inputs outside what the kernels cover (element-level NULLs in vectors, more distinct
//! group keys than the device table holds) return `Unsupported`, so the operator runs
//! that batch on the CPU. Verified on this project's machines only by compilation and
//! NVRTC; see STATUS.md for what has executed on a GPU.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array, UInt32Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{BLOCK, Dev, grid, one_block, unsupported};
use super::lane_pool::{LaneBytes, LaneKey, LaneState};
use super::pipeline::{self, Staging};
use crate::kernels::CudaKernel;
use crate::ops::{AggFunc, AggregateArgs, DistanceMetric, JoinMatches, VectorDistanceArgs};

/// Slots of the first device group table of a batch; one with more keys gets a table of
/// twice its rows.
const AGG_CAPACITY: usize = 1 << 12;

/// Device state of a built join table.
pub(crate) struct CudaJoinTable {
    capacity: u64,
    slot_state: CudaSlice<u32>,
    slot_keys: CudaSlice<i64>,
    slot_rows: CudaSlice<u32>,
}

impl CudaJoinTable {
    /// Device bytes held by the table.
    pub(crate) fn allocated_bytes(&self) -> usize {
        (self.capacity as usize) * (4 + 8 + 4)
    }
}

pub(super) fn build_join_table(
    dev: &Dev<'_>,
    keys: &Int64Array,
) -> Result<CudaJoinTable, EngineError> {
    let rows = keys.len();
    if rows == 0 {
        return build_join_table_at(dev, 0, 0, 0);
    }
    let d_keys = dev.upload(keys.values())?;
    let d_valid = dev.validity(keys.nulls(), rows)?;
    // The addresses stay valid: the build waits for its kernel before returning.
    let (keys_at, valid_at) = (slice_address(dev, &d_keys), slice_address(dev, &d_valid));
    build_join_table_at(dev, keys_at, valid_at, rows)
}

/// Builds the table over `rows` Int64 keys at device address `keys` (validity bitmap at
/// `valid`, 0 for none: NULL keys are not inserted); waits for the build, so the
/// addresses need to stay valid only until this returns.
pub(super) fn build_join_table_at(
    dev: &Dev<'_>,
    keys: u64,
    valid: u64,
    rows: usize,
) -> Result<CudaJoinTable, EngineError> {
    if rows >= u32::MAX as usize / 2 {
        return Err(unsupported("join build side over 2^31 rows"));
    }
    let capacity = (rows.max(1) * 2).next_power_of_two();
    let (mut slot_state, mut slot_keys, mut slot_rows) = (
        dev.zeros::<u32>(capacity)?,
        dev.zeros::<i64>(capacity)?,
        dev.zeros::<u32>(capacity)?,
    );
    let capacity_u64 = capacity as u64;
    if rows > 0 {
        let rows_u64 = rows as u64;
        let f = dev.gpu.function(CudaKernel::HashJoin, "join_build")?;
        let mut launch = dev.stream.launch_builder(&f);
        launch
            .arg(&keys)
            .arg(&valid)
            .arg(&rows_u64)
            .arg(&capacity_u64)
            .arg(&mut slot_state)
            .arg(&mut slot_keys)
            .arg(&mut slot_rows);
        // SAFETY: join_build(const i64*, const u8*, u64, u64, u32*, i64*, u32*): `keys`
        // addresses `rows` keys and `valid` a bitmap of ceil(rows/8) bytes or 0 (the
        // caller's contract), the three slot arrays hold `capacity` entries (a power of
        // two above rows, so every insert finds a slot) and the kernel masks every index.
        #[allow(unsafe_code)]
        unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_build"))?;
        dev.sync()?;
    }
    Ok(CudaJoinTable {
        capacity: capacity_u64,
        slot_state,
        slot_keys,
        slot_rows,
    })
}

pub(super) fn probe_join_table(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    keys: &Int64Array,
) -> Result<JoinMatches, EngineError> {
    let rows = keys.len();
    let d_keys = dev.upload(keys.values())?;
    let d_valid = dev.validity(keys.nulls(), rows)?;
    let (keys_at, valid_at) = (slice_address(dev, &d_keys), slice_address(dev, &d_valid));
    let (build, probe) = match probe_pairs(dev, table, keys_at, valid_at, rows)? {
        Some(pairs) => (dev.download(&pairs.build)?, dev.download(&pairs.probe)?),
        None => (Vec::new(), Vec::new()),
    };
    Ok(JoinMatches {
        build_indices: UInt32Array::from(build),
        probe_indices: UInt32Array::from(probe),
    })
}

/// The device address of `slice` (its writes are ordered on `dev`'s stream before any
/// kernel enqueued there after this call).
pub(super) fn slice_address<T>(dev: &Dev<'_>, slice: &CudaSlice<T>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _sync) = slice.device_ptr(dev.stream);
    ptr
}

/// The matched pairs of a probe, on the device: each pair's build row and probe row.
pub(super) struct DevicePairs {
    pub(super) build: CudaSlice<u32>,
    pub(super) probe: CudaSlice<u32>,
    pub(super) len: usize,
}

/// Probes `table` with `rows` Int64 keys at device address `keys` (validity bitmap at
/// `valid`, 0 for none: NULL keys never match); `None` when no row matches. The match
/// counts are scanned into each row's first pair on the device
/// ([`scan_counts`]); only their total (8 bytes) comes to the host, which sizes the
/// pairs. The addresses must stay valid until this returns: it reads the total, which
/// waits for the kernels reading them.
pub(super) fn probe_pairs(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    keys: u64,
    valid: u64,
    rows: usize,
) -> Result<Option<DevicePairs>, EngineError> {
    if rows == 0 {
        return Ok(None);
    }
    let counts = probe_counts(dev, table, keys, valid, rows)?;
    let (offsets, total) = scan_counts(dev, &counts, rows)?;
    if total == 0 {
        return Ok(None);
    }
    let rows_u64 = rows as u64;
    let len = usize::try_from(total).map_err(|_| unsupported("join output too large"))?;
    let (mut build, mut probe) = (dev.zeros::<u32>(len)?, dev.zeros::<u32>(len)?);
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_probe_write")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&keys)
        .arg(&valid)
        .arg(&rows_u64)
        .arg(&table.capacity)
        .arg(&table.slot_state)
        .arg(&table.slot_keys)
        .arg(&table.slot_rows)
        .arg(&offsets)
        .arg(&total)
        .arg(&mut build)
        .arg(&mut probe);
    // SAFETY: join_probe_write's arguments in order, keys and validity as for
    // join_probe_count; offsets holds `rows` entries, the outputs hold `total` pairs and
    // the kernel checks dst < out_capacity before each write.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_probe_write"))?;
    dev.sync()?;
    Ok(Some(DevicePairs { build, probe, len }))
}

/// Exclusive prefix sums of the first `rows` match `counts`, in 64 bits, on the device
/// (`join_scan_counts` per block, `join_scan_totals` over the block totals in one block,
/// `join_add_block_offsets`), and their total, read back (8 bytes).
fn scan_counts(
    dev: &Dev<'_>,
    counts: &CudaSlice<u32>,
    rows: usize,
) -> Result<(CudaSlice<u64>, u64), EngineError> {
    let blocks = rows.div_ceil(BLOCK as usize).max(1);
    let (rows_u64, blocks_u64) = (rows as u64, blocks as u64);
    let mut offsets = dev.zeros::<u64>(rows)?;
    let mut totals = dev.zeros::<u64>(blocks + 1)?;
    let per_block = dev.gpu.function(CudaKernel::HashJoin, "join_scan_counts")?;
    let mut launch = dev.stream.launch_builder(&per_block);
    launch
        .arg(counts)
        .arg(&rows_u64)
        .arg(&mut offsets)
        .arg(&mut totals);
    // SAFETY: join_scan_counts(const u32*, u64, u64*, u64*): counts and offsets hold
    // `rows` entries, totals `blocks` + 1; a grid of `blocks` blocks of BLOCK threads
    // (the kernel's JOIN_BLOCK), every row index bounded by rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_scan_counts"))?;
    let across = dev.gpu.function(CudaKernel::HashJoin, "join_scan_totals")?;
    let mut launch = dev.stream.launch_builder(&across);
    launch.arg(&mut totals).arg(&blocks_u64);
    // SAFETY: join_scan_totals(u64*, u64) runs as one block of BLOCK threads and touches
    // entries 0..=blocks of totals, which holds blocks + 1.
    #[allow(unsafe_code)]
    unsafe { launch.launch(one_block()) }.map_err(dev.err("launch join_scan_totals"))?;
    let add = dev
        .gpu
        .function(CudaKernel::HashJoin, "join_add_block_offsets")?;
    let mut launch = dev.stream.launch_builder(&add);
    launch.arg(&mut offsets).arg(&rows_u64).arg(&totals);
    // SAFETY: join_add_block_offsets(u64*, u64, const u64*): the grid of
    // join_scan_counts; offsets holds rows entries, totals one per block and more.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_add_block_offsets"))?;
    let total = dev
        .stream
        .clone_dtoh(&totals.slice(blocks..blocks + 1))
        .map_err(dev.err("cuMemcpyDtoH"))?;
    super::transfers::device_to_host(8);
    Ok((offsets, total.first().copied().unwrap_or(0)))
}

/// Each of `rows` probe keys' number of matches in `table` (keys and validity as for
/// [`probe_pairs`]), on the device; enqueued, not waited for.
pub(super) fn probe_counts(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    keys: u64,
    valid: u64,
    rows: usize,
) -> Result<CudaSlice<u32>, EngineError> {
    let rows_u64 = rows as u64;
    let mut counts = dev.zeros::<u32>(rows)?;
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_probe_count")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&keys)
        .arg(&valid)
        .arg(&rows_u64)
        .arg(&table.capacity)
        .arg(&table.slot_state)
        .arg(&table.slot_keys)
        .arg(&mut counts);
    // SAFETY: join_probe_count(const i64*, const u8*, u64, u64, const u32*, const i64*,
    // u32*): `keys` addresses `rows` Int64 keys and `valid` a bitmap of ceil(rows/8)
    // bytes or 0 (the caller's contract), the table arrays hold `capacity` slots, counts
    // holds rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_probe_count"))?;
    Ok(counts)
}

/// The open-addressing group table of one batch on the device.
struct GroupTable {
    /// Slots for keys (a power of two); slot `capacity` is the NULL group.
    capacity: usize,
    slot_state: CudaSlice<u32>,
    slot_keys: CudaSlice<i64>,
    /// Each row's slot.
    group_of_row: CudaSlice<u32>,
}

/// Assigns each of `rows` keys a slot in a table of `capacity` (a power of two) slots;
/// `None` when the batch has more distinct keys than that.
fn assign_groups(
    dev: &Dev<'_>,
    d_keys: &CudaSlice<i64>,
    d_valid: &CudaSlice<u8>,
    rows: usize,
    capacity: usize,
) -> Result<Option<GroupTable>, EngineError> {
    let slots = capacity + 1; // + the NULL group
    let (mut slot_state, mut slot_keys) = (dev.zeros::<u32>(slots)?, dev.zeros::<i64>(slots)?);
    let (mut group_of_row, mut overflow) = (dev.zeros::<u32>(rows)?, dev.zeros::<u32>(1)?);
    let (rows_u64, capacity_u64) = (rows as u64, capacity as u64);
    let f = dev
        .gpu
        .function(CudaKernel::Aggregation, "agg_assign_groups")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(d_keys)
        .arg(d_valid)
        .arg(&rows_u64)
        .arg(&capacity_u64)
        .arg(&mut slot_state)
        .arg(&mut slot_keys)
        .arg(&mut group_of_row)
        .arg(&mut overflow);
    // SAFETY: agg_assign_groups' arguments in order; the slot arrays hold capacity + 1
    // entries (the last is the NULL group), group_of_row holds `rows`, overflow one u32,
    // and capacity is a power of two (the kernel masks hashes with capacity - 1).
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch agg_assign_groups"))?;
    if dev.download(&overflow)?.first().copied().unwrap_or(0) != 0 {
        return Ok(None);
    }
    Ok(Some(GroupTable {
        capacity,
        slot_state,
        slot_keys,
        group_of_row,
    }))
}

pub(super) fn aggregate(
    dev: &Dev<'_>,
    args: AggregateArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    crate::ops::validate::aggregate(&args)?;
    let batch = args.batch;
    let rows = batch.num_rows();
    if rows == 0 {
        // No rows, no groups.
        return Ok(RecordBatch::new_empty(
            crate::ops::validate::aggregate_schema(&args)?,
        ));
    }
    let keys = batch
        .column(args.group_column)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| unsupported("group key is not Int64"))?;
    let rows_u64 = rows as u64;
    let d_keys = dev.upload(keys.values())?;
    let d_valid = dev.validity(keys.nulls(), rows)?;
    // A small table first (most group-bys have few keys); a batch with more distinct keys
    // than it holds is assigned again in one sized for every row being its own group,
    // which cannot overflow.
    let table = match assign_groups(dev, &d_keys, &d_valid, rows, AGG_CAPACITY)? {
        Some(table) => table,
        None => {
            let capacity = rows
                .saturating_mul(2)
                .next_power_of_two()
                .max(AGG_CAPACITY * 2);
            tracing::debug!(
                rows,
                capacity,
                "device aggregate: more than {AGG_CAPACITY} keys in a batch; a larger table"
            );
            assign_groups(dev, &d_keys, &d_valid, rows, capacity)?.ok_or_else(|| {
                unsupported(format!(
                    "more than {capacity} distinct keys in a batch of {rows} rows"
                ))
            })?
        }
    };
    let GroupTable {
        capacity,
        slot_state,
        slot_keys,
        group_of_row,
    } = table;
    let slots = capacity + 1; // + the NULL group
    let state = dev.download(&slot_state)?;
    let key_values = dev.download(&slot_keys)?;
    let used: Vec<usize> = (0..slots).filter(|s| state[*s] == 2).collect();
    let groups_u64 = slots as u64;
    let mut out_columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(
        used.iter()
            .map(|s| (*s < capacity).then_some(key_values[*s]))
            .collect::<Vec<_>>(),
    ))];
    for spec in args.aggregates {
        let column = batch.column(spec.column);
        let d_valid = dev.validity(column.nulls(), rows)?;
        let mut counts = dev.zeros::<u64>(slots)?;
        let op = match spec.func {
            AggFunc::Sum => 0i32,
            AggFunc::Count => 1,
            AggFunc::Min => 2,
            AggFunc::Max => 3,
        };
        let init: i64 = match spec.func {
            AggFunc::Min => i64::MAX,
            AggFunc::Max => i64::MIN,
            _ => 0,
        };
        let mut acc = dev.upload(&vec![init; slots])?;
        let is_float = column.data_type() == &DataType::Float64;
        // Only the f64 kernel takes a float-sum accumulator; it is read back only for SUM.
        let mut acc_sum = dev.zeros::<f64>(if is_float { slots } else { 1 })?;
        if is_float {
            let values = column
                .as_any()
                .downcast_ref::<Float64Array>()
                .ok_or_else(|| unsupported("not Float64"))?;
            let d_values = dev.upload(values.values())?;
            let f = dev
                .gpu
                .function(CudaKernel::Aggregation, "agg_update_f64")?;
            let mut launch = dev.stream.launch_builder(&f);
            launch
                .arg(&d_values)
                .arg(&d_valid)
                .arg(&group_of_row)
                .arg(&rows_u64)
                .arg(&groups_u64)
                .arg(&op)
                .arg(&mut acc_sum)
                .arg(&mut acc)
                .arg(&mut counts);
            // SAFETY: agg_update_f64's arguments in order; values/validity/group_of_row
            // cover `rows`, accumulators and counts hold `slots` entries and the kernel
            // skips group ids >= groups.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch agg_update_f64"))?;
        } else {
            let values = column
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| unsupported("not Int64"))?;
            let d_values = dev.upload(values.values())?;
            let f = dev
                .gpu
                .function(CudaKernel::Aggregation, "agg_update_i64")?;
            let mut launch = dev.stream.launch_builder(&f);
            launch
                .arg(&d_values)
                .arg(&d_valid)
                .arg(&group_of_row)
                .arg(&rows_u64)
                .arg(&groups_u64)
                .arg(&op)
                .arg(&mut acc)
                .arg(&mut counts);
            // SAFETY: agg_update_i64's arguments in order, sized as for agg_update_f64.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch agg_update_i64"))?;
        }
        let counts = dev.download(&counts)?;
        let acc = dev.download(&acc)?;
        let sums = if is_float && spec.func == AggFunc::Sum {
            dev.download(&acc_sum)?
        } else {
            Vec::new()
        };
        let seen = |s: usize| counts[s] > 0;
        let column: ArrayRef = match (spec.func, is_float) {
            (AggFunc::Count, _) => Arc::new(Int64Array::from(
                used.iter().map(|s| counts[*s] as i64).collect::<Vec<_>>(),
            )),
            (AggFunc::Sum, true) => Arc::new(Float64Array::from(
                used.iter()
                    .map(|s| seen(*s).then_some(sums[*s]))
                    .collect::<Vec<_>>(),
            )),
            (_, true) => Arc::new(Float64Array::from(
                used.iter()
                    .map(|s| {
                        // Undo the total-order integer image (an involution).
                        let k = acc[*s];
                        let bits = k ^ (((k >> 63) as u64) >> 1) as i64;
                        seen(*s).then_some(f64::from_bits(bits as u64))
                    })
                    .collect::<Vec<_>>(),
            )),
            (_, false) => Arc::new(Int64Array::from(
                used.iter()
                    .map(|s| seen(*s).then_some(acc[*s]))
                    .collect::<Vec<_>>(),
            )),
        };
        out_columns.push(column);
    }
    let schema = crate::ops::validate::aggregate_schema(&args)?;
    Ok(RecordBatch::try_new(schema, out_columns)?)
}

/// Per-lane buffers of the vector-distance pipeline.
struct DistanceLane {
    vectors: Staging<f32>,
    valid: Staging<u8>,
    out: Staging<f64>,
    out_valid: Staging<u8>,
}

impl LaneState for DistanceLane {
    fn bytes(&self) -> LaneBytes {
        self.vectors.bytes() + self.valid.bytes() + self.out.bytes() + self.out_valid.bytes()
    }
}

pub(super) fn vector_distance(
    dev: &Dev<'_>,
    args: VectorDistanceArgs<'_>,
) -> Result<Float64Array, EngineError> {
    crate::ops::validate::vector_distance(&args)?;
    let list: &FixedSizeListArray = args.vectors;
    let rows = list.len();
    if rows == 0 {
        return Ok(Float64Array::from(Vec::<Option<f64>>::new()));
    }
    let dim = list.value_length() as usize;
    let values = list
        .values()
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| unsupported("vector values are not Float32"))?;
    let start = list.offset() * dim;
    if values.slice(start, rows * dim).null_count() > 0 {
        return Err(unsupported("NULL elements inside vectors"));
    }
    let flat = &values.values()[start..start + rows * dim];
    let d_query = dev.upload(args.query)?;
    let dim_i32 = i32::try_from(dim).map_err(|_| unsupported("vector dimension"))?;
    let shared_mem_bytes = u32::try_from(dim * 4).map_err(|_| unsupported("vector dimension"))?;
    let entry = match args.metric {
        DistanceMetric::L2 => "l2_distance",
        DistanceMetric::Cosine => "cosine_distance",
    };
    let f = dev.gpu.function(CudaKernel::VectorDistance, entry)?;
    let nulls = list.nulls();
    let (mut distances, mut validity) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    pipeline::double_buffered(
        dev,
        rows,
        |lane_rows| LaneKey::new("vector_distance", vec![lane_rows as u64, dim as u64]),
        |stream, lane_rows| {
            Ok(DistanceLane {
                vectors: Staging::new(dev, stream, lane_rows * dim)?,
                valid: Staging::new(dev, stream, lane_rows.div_ceil(8))?,
                out: Staging::new(dev, stream, lane_rows)?,
                out_valid: Staging::new(dev, stream, lane_rows)?,
            })
        },
        |lane, stream, range| {
            let n = range.len();
            lane.vectors.host_mut(dev)?[..n * dim]
                .copy_from_slice(&flat[range.start * dim..range.end * dim]);
            pipeline::chunk_validity(nulls, &range, lane.valid.host_mut(dev)?);
            lane.vectors.upload(dev, stream)?;
            lane.valid.upload(dev, stream)?;
            let rows_u64 = n as u64;
            let warps_per_block = (BLOCK / 32) as usize;
            let blocks = u32::try_from(n.div_ceil(warps_per_block).min(65_535)).unwrap_or(65_535);
            let config = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes,
            };
            let DistanceLane {
                vectors,
                valid,
                out,
                out_valid,
            } = lane;
            let mut launch = stream.launch_builder(&f);
            launch
                .arg(vectors.device())
                .arg(valid.device())
                .arg(&d_query)
                .arg(&dim_i32)
                .arg(&rows_u64)
                .arg(out.device_mut())
                .arg(out_valid.device_mut());
            // SAFETY: l2_distance/cosine_distance(const f32*, const u8*, const f32*, int,
            // u64, f64*, u8*): the lane's buffers hold lane_rows >= n rows (vectors
            // n * dim floats, validity ceil(n/8) bytes, outputs n entries), the query dim
            // floats; dynamic shared memory is dim floats, where the kernel stages the
            // query; the kernel bounds every access by `rows` = n and `dim`.
            #[allow(unsafe_code)]
            unsafe { launch.launch(config) }.map_err(dev.err("launch vector distance"))?;
            out.download(dev, stream, n)?;
            out_valid.download(dev, stream, n)
        },
        |lane, range| {
            let n = range.len();
            distances.extend_from_slice(&lane.out.host(dev)?[..n]);
            validity.extend(lane.out_valid.host(dev)?[..n].iter().map(|v| *v != 0));
            Ok(())
        },
    )?;
    Ok(Float64Array::new(
        distances.into(),
        Some(NullBuffer::from(validity)),
    ))
}
