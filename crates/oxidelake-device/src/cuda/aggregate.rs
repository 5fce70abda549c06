//! The CUDA grouped partial aggregation of a device-resident batch (ADR-0014).
//!
//! The rows are grouped where they lie: `agg_assign_groups_rows` hashes and compares the
//! key columns in place (any number of them, images or strings), so no key is numbered
//! on the host. The used slots are listed in slot order (`agg_slot_flags`, then
//! `gather::list_flagged`), which makes them
//! dense group numbers; `agg_group_rows` names each group's first row, whose key values
//! are gathered into the output. The aggregates fold into one table of 8-byte words
//! (an accumulator and a count per aggregate, `agg_update_i64` / `agg_update_f64`),
//! compacted into the output beside the keys (`agg_compact_words`). One copy brings the
//! output to the host; besides it, the host reads the overflow flag, the group count and
//! each string key's byte total (4 bytes each).
//!
//! An integer or decimal SUM is summed as two 32-bit halves of its images, which cannot
//! overflow in a batch under 2^31 rows; the host puts them together in 128 bits.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use cudarc::driver::{CudaSlice, PushKernelArg};
use oxidelake_core::EngineError;

use super::filter::device_ptr_table;
use super::gather::{gather_columns, list_flagged, string_extents};
use super::gpu::{Dev, grid, unsupported};
use super::memory::{SyncOnExit, address, alloc_on_stream, alloc_scratch, batch_pool};
use crate::DeviceStream;
use crate::device_batch::{DeviceColumn, DeviceColumns, Layout, Span, ValueLayout};
use crate::kernels::CudaKernel;
use crate::ops::{Agg, AggFunc, AggInput, AggregateArgs};

/// Slots of the first group table of a batch; a batch with more distinct keys is grouped
/// again in a table of twice its rows, which cannot overflow.
const FIRST_CAPACITY: usize = 1 << 12;

/// `agg_update_*`'s operation codes (aggregation.cu).
const OP_SUM: i32 = 0;
const OP_COUNT: i32 = 1;
const OP_MIN: i32 = 2;
const OP_MAX: i32 = 3;
const OP_SUM_LO: i32 = 4;
const OP_SUM_HI: i32 = 5;

/// The image span of column `c`, refusing a column held otherwise.
fn images(batch: &DeviceColumns, c: usize) -> Result<Span, EngineError> {
    match batch.columns()[c].values {
        ValueLayout::Images(span) => Ok(span),
        ValueLayout::Wide(_) => Err(unsupported(
            "a device aggregate over a decimal column whose batch needs more than 64 bits",
        )),
        ValueLayout::Strings { .. } => Err(unsupported(
            "a device aggregate of values over a string column",
        )),
    }
}

/// The key columns' tables for `agg_assign_groups_rows`: kinds, then the images,
/// offsets, bytes and validity addresses (0 where a column has none).
fn key_tables(
    batch: &DeviceColumns,
    keys: &[usize],
) -> Result<(Vec<i32>, [Vec<u64>; 4]), EngineError> {
    let memory = batch.memory();
    let mut kinds = Vec::with_capacity(keys.len());
    let mut tables: [Vec<u64>; 4] = Default::default();
    for k in keys {
        let column = &batch.columns()[*k];
        let (kind, images, offsets, bytes) = match column.values {
            ValueLayout::Images(span) => (0, address(memory, span.offset), 0, 0),
            ValueLayout::Strings { offsets, bytes } => (
                1,
                0,
                address(memory, offsets.offset),
                address(memory, bytes.offset),
            ),
            ValueLayout::Wide(_) => {
                return Err(unsupported(
                    "a device group key over a decimal column whose batch needs more than 64 bits",
                ));
            }
        };
        let validity = column
            .validity
            .map_or(0, |span| address(memory, span.offset));
        kinds.push(kind);
        for (table, value) in tables.iter_mut().zip([images, offsets, bytes, validity]) {
            table.push(value);
        }
    }
    Ok((kinds, tables))
}

/// The device's group table of one batch.
struct Groups {
    capacity: usize,
    slot_state: CudaSlice<u32>,
    slot_row: CudaSlice<u32>,
    group_of_row: CudaSlice<u32>,
}

/// Groups the `rows` rows in a table of `capacity` slots (a power of two); `None` when
/// the batch has more distinct keys than that.
fn assign(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    keys: &[usize],
    capacity: usize,
) -> Result<Option<Groups>, EngineError> {
    let stream = dev.stream;
    let rows = batch.num_rows();
    let (kinds, [images, offsets, bytes, validity]) = key_tables(batch, keys)?;
    let columns =
        i32::try_from(keys.len()).map_err(|_| unsupported("too many group key columns"))?;
    // An empty table still needs an allocation; the kernel reads none of it.
    let pad = |mut v: Vec<u64>| {
        if v.is_empty() {
            v.push(0);
        }
        v
    };
    let kinds = if kinds.is_empty() { vec![0] } else { kinds };
    let kinds = dev.upload(&kinds)?;
    let images = device_ptr_table(dev, stream, pad(images).into_iter())?;
    let offsets = device_ptr_table(dev, stream, pad(offsets).into_iter())?;
    let bytes = device_ptr_table(dev, stream, pad(bytes).into_iter())?;
    let validity = device_ptr_table(dev, stream, pad(validity).into_iter())?;
    let mut slot_state = dev.zeros::<u32>(capacity)?;
    let mut slot_row = dev.zeros::<u32>(capacity)?;
    let mut group_of_row = dev.zeros::<u32>(rows)?;
    let mut overflow = dev.zeros::<u32>(1)?;
    let (rows_u64, capacity_u64) = (rows as u64, capacity as u64);
    let f = dev
        .gpu
        .function(CudaKernel::Aggregation, "agg_assign_groups_rows")?;
    let mut launch = stream.launch_builder(&f);
    launch
        .arg(&kinds)
        .arg(&images)
        .arg(&offsets)
        .arg(&bytes)
        .arg(&validity)
        .arg(&columns)
        .arg(&rows_u64)
        .arg(&capacity_u64)
        .arg(&mut slot_state)
        .arg(&mut slot_row)
        .arg(&mut group_of_row)
        .arg(&mut overflow);
    // SAFETY: agg_assign_groups_rows(const int*, const u64* x4, int, u64, u64, u32* x4):
    // the five tables hold one entry per key column (`columns`; one unread entry when
    // there are none), addresses inside the batch's allocation: `rows` images of an
    // image key, rows + 1 offsets from 0 and their bytes of a string key, a bitmap of
    // ceil(rows/8) bytes or 0 (no NULLs); the kernel reads only its column kind's
    // buffers. slot_state and slot_row hold `capacity` entries (a power of two: hashes
    // are masked with capacity - 1), group_of_row `rows`, overflow one.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch agg_assign_groups_rows"))?;
    if dev.download(&overflow)?.first().copied().unwrap_or(0) != 0 {
        return Ok(None);
    }
    Ok(Some(Groups {
        capacity,
        slot_state,
        slot_row,
        group_of_row,
    }))
}

/// The used slots of `groups`' table in slot order (the dense group numbers), and how
/// many there are (read back: the output's size).
fn used_slots(dev: &Dev<'_>, groups: &Groups) -> Result<(CudaSlice<u32>, usize), EngineError> {
    let slots = groups.capacity;
    let slots_u64 = slots as u64;
    let mut flags = dev.zeros::<u8>(slots)?;
    let f = dev
        .gpu
        .function(CudaKernel::Aggregation, "agg_slot_flags")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&groups.slot_state)
        .arg(&slots_u64)
        .arg(&mut flags);
    // SAFETY: agg_slot_flags(const u32*, u64, u8*): slot_state and flags hold `slots`
    // entries and the kernel bounds its index by slots.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(slots)) }.map_err(dev.err("launch agg_slot_flags"))?;
    list_flagged(dev, &flags, slots)
}

/// The `agg_update_*` call of one aggregate: its operation, the values and validity
/// addresses it reads (0: none), and whether it is the f64 kernel.
fn update_of(batch: &DeviceColumns, agg: &Agg) -> Result<(i32, u64, u64, bool), EngineError> {
    let memory = batch.memory();
    let validity = |c: usize| {
        batch.columns()[c]
            .validity
            .map_or(0, |span| address(memory, span.offset))
    };
    let op = match agg.func {
        AggFunc::Sum => OP_SUM,
        AggFunc::Count => OP_COUNT,
        AggFunc::Min => OP_MIN,
        AggFunc::Max => OP_MAX,
    };
    Ok(match agg.input {
        AggInput::Rows => (OP_COUNT, 0, 0, false),
        AggInput::Valid(c) => (OP_COUNT, 0, validity(c), false),
        AggInput::Int(c) => (
            op,
            address(memory, images(batch, c)?.offset),
            validity(c),
            false,
        ),
        AggInput::Float(c) => (
            op,
            address(memory, images(batch, c)?.offset),
            validity(c),
            true,
        ),
        AggInput::Low32(c) => (
            OP_SUM_LO,
            address(memory, images(batch, c)?.offset),
            validity(c),
            false,
        ),
        AggInput::High32(c) => (
            OP_SUM_HI,
            address(memory, images(batch, c)?.offset),
            validity(c),
            false,
        ),
    })
}

/// Folds every aggregate into a table of `2 * aggregates` word columns of `capacity`
/// slots each: aggregate `i`'s accumulator in column `2i`, its count in `2i + 1`.
fn fold(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    groups: &Groups,
    aggregates: &[Agg],
) -> Result<crate::DeviceBuffer, EngineError> {
    let stream = dev.stream;
    let capacity = groups.capacity;
    let words = 2 * aggregates.len();
    let table = alloc_scratch(dev, (words * capacity * 8).max(8))?;
    let word = |w: usize| address(&table, w * capacity * 8);
    let (rows, capacity_u64) = (batch.num_rows(), capacity as u64);
    let rows_u64 = rows as u64;
    for (i, agg) in aggregates.iter().enumerate() {
        let (op, values, validity, float) = update_of(batch, agg)?;
        let (acc, counts) = (word(2 * i), word(2 * i + 1));
        let init = match op {
            OP_MIN => Some(i64::MAX),
            OP_MAX => Some(i64::MIN),
            _ => None,
        };
        if let Some(init) = init {
            let fill = dev.gpu.function(CudaKernel::Aggregation, "agg_fill")?;
            let mut launch = stream.launch_builder(&fill);
            launch.arg(&acc).arg(&capacity_u64).arg(&init);
            // SAFETY: agg_fill(i64*, u64, i64): `acc` addresses word column 2i of the
            // table, `capacity` words, and the kernel bounds its index by capacity.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(capacity)) }.map_err(dev.err("launch agg_fill"))?;
        }
        let kernel = if float {
            "agg_update_f64"
        } else {
            "agg_update_i64"
        };
        let f = dev.gpu.function(CudaKernel::Aggregation, kernel)?;
        let mut launch = stream.launch_builder(&f);
        launch
            .arg(&values)
            .arg(&validity)
            .arg(&groups.group_of_row)
            .arg(&rows_u64)
            .arg(&capacity_u64)
            .arg(&op)
            .arg(&acc);
        if float {
            // The f64 kernel's ordered-image accumulator: the same words (an operation
            // writes only one of its two accumulators).
            launch.arg(&acc);
        }
        launch.arg(&counts);
        // SAFETY: agg_update_i64(const i64*, const u8*, const u32*, u64, u64, int, i64*,
        // u64*) and agg_update_f64(const f64*, const u8*, const u32*, u64, u64, int, f64*,
        // i64*, u64*): `values` addresses the column's `rows` images in the batch (COUNT
        // reads none: it may be 0 then) and `validity` its bitmap or 0; group_of_row
        // holds `rows` slots below capacity (no overflow: `assign` returned the table);
        // the accumulator and count addresses are word columns of `capacity` words.
        #[allow(unsafe_code)]
        unsafe { launch.launch(grid(rows)) }.map_err(dev.err(&format!("launch {kernel}")))?;
    }
    Ok(table)
}

/// See the module docs.
pub(super) fn aggregate(
    dev: &Dev<'_>,
    device_stream: &DeviceStream,
    batch: &DeviceColumns,
    args: AggregateArgs<'_>,
) -> Result<RecordBatch, EngineError> {
    crate::ops::check_aggregates(batch.columns().len(), args.keys, args.aggregates)?;
    let schema = args.result_schema();
    let rows = batch.num_rows();
    if rows == 0 {
        return Ok(RecordBatch::new_empty(schema));
    }
    // Group numbers are u32, and the 32-bit halves of a decimal sum are exact below 2^31
    // rows.
    if rows >= 1 << 31 {
        return Err(unsupported(
            "a device aggregate over a batch of 2^31 rows or more",
        ));
    }
    let _finished = SyncOnExit(dev.stream);
    let groups = match assign(dev, batch, args.keys, FIRST_CAPACITY)? {
        Some(groups) => groups,
        None => {
            let capacity = (rows * 2).next_power_of_two().max(FIRST_CAPACITY * 2);
            assign(dev, batch, args.keys, capacity)?.ok_or_else(|| {
                unsupported(format!("more than {capacity} distinct keys in {rows} rows"))
            })?
        }
    };
    let (used, count) = used_slots(dev, &groups)?;
    let count_u64 = count as u64;
    let mut group_rows = dev.zeros::<u32>(count)?;
    let f = dev
        .gpu
        .function(CudaKernel::Aggregation, "agg_group_rows")?;
    let mut launch = dev.stream.launch_builder(&f);
    let capacity_u64 = groups.capacity as u64;
    launch
        .arg(&used)
        .arg(&count_u64)
        .arg(&capacity_u64)
        .arg(&groups.slot_row)
        .arg(&mut group_rows);
    // SAFETY: agg_group_rows(const u32*, u64, u64, const u32*, u32*): used holds >= count
    // slot numbers (compact_rows listed them), slot_row `capacity` entries, group_rows
    // max(count, 1); the kernel bounds g by count and each slot by capacity.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(count)) }.map_err(dev.err("launch agg_group_rows"))?;
    let table = fold(dev, batch, &groups, args.aggregates)?;

    // The output: the keys at each group's first row, then the word columns.
    let extents = string_extents(dev, batch, args.keys, &group_rows, count)?;
    let mut layout = Layout::new();
    let mut columns: Vec<DeviceColumn> = args
        .keys
        .iter()
        .zip(&extents)
        .map(|(k, extent)| layout.column_like(&batch.columns()[*k], count, extent.bytes))
        .collect();
    let words = 2 * args.aggregates.len();
    let results = layout.take(words * count * 8);
    columns.extend((0..words).map(|w| DeviceColumn {
        data_type: DataType::Int64,
        values: ValueLayout::Images(Span {
            offset: results.offset + w * count * 8,
            len: count * 8,
        }),
        validity: None,
    }));
    let memory = alloc_on_stream(dev, layout.size())?;
    gather_columns(
        dev,
        batch,
        args.keys,
        &group_rows,
        count,
        &extents,
        &columns,
        &memory,
    )?;
    if words > 0 {
        let f = dev
            .gpu
            .function(CudaKernel::Aggregation, "agg_compact_words")?;
        let mut launch = dev.stream.launch_builder(&f);
        let (table_at, out_at, words_u64) = (
            address(&table, 0),
            address(&memory, results.offset),
            words as u64,
        );
        launch
            .arg(&table_at)
            .arg(&capacity_u64)
            .arg(&words_u64)
            .arg(&used)
            .arg(&count_u64)
            .arg(&out_at);
        // SAFETY: agg_compact_words(const i64*, u64, u64, const u32*, u64, i64*): the table
        // holds `words` columns of `capacity` words, used >= count slot numbers below
        // capacity, and the output span words * count words; one thread per output word.
        #[allow(unsafe_code)]
        unsafe { launch.launch(grid(words * count)) }
            .map_err(dev.err("launch agg_compact_words"))?;
    }
    dev.sync()?;
    // The result's key fields, then the word columns the host turns into results.
    let mut fields: Vec<Field> = schema.fields()[..args.keys.len()]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.extend((0..words).map(|w| Field::new(format!("w{w}"), DataType::Int64, false)));
    let out = DeviceColumns::from_parts(
        Arc::new(Schema::new(fields)),
        count,
        columns,
        memory,
        batch_pool(dev),
    );
    let host = crate::device_batch::copy_back(dev.backend, device_stream, &out, None)?;
    drop(table);
    results_from_words(&host, args.keys.len(), args.aggregates, schema)
}

/// The result batch from the downloaded keys and word columns (see
/// [`AggregateArgs`]).
fn results_from_words(
    host: &RecordBatch,
    keys: usize,
    aggregates: &[Agg],
    schema: SchemaRef,
) -> Result<RecordBatch, EngineError> {
    let mut out: Vec<ArrayRef> = host.columns()[..keys].to_vec();
    for (i, agg) in aggregates.iter().enumerate() {
        let acc = host.column(keys + 2 * i).as_primitive::<Int64Type>();
        let counts = host.column(keys + 2 * i + 1).as_primitive::<Int64Type>();
        if agg.func == AggFunc::Count {
            out.push(Arc::new(Int64Array::new(counts.values().clone(), None)));
            continue;
        }
        let seen = NullBuffer::from_iter(counts.values().iter().map(|c| *c > 0));
        let column: ArrayRef = match (agg.input, agg.func) {
            (AggInput::Float(_), AggFunc::Sum) => Arc::new(Float64Array::new(
                acc.values()
                    .iter()
                    .map(|bits| f64::from_bits(*bits as u64))
                    .collect(),
                Some(seen),
            )),
            (AggInput::Float(_), _) => Arc::new(Float64Array::new(
                acc.values()
                    .iter()
                    .map(|k| {
                        // Undo the total-order integer image (an involution).
                        f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64)
                    })
                    .collect(),
                Some(seen),
            )),
            _ => Arc::new(Int64Array::new(acc.values().clone(), Some(seen))),
        };
        out.push(column);
    }
    Ok(RecordBatch::try_new(schema, out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_become_results_with_nulls_where_a_group_saw_no_value_and_counts_never_null() {
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None]));
        let ordered = |v: f64| {
            let b = v.to_bits() as i64;
            b ^ (((b >> 63) as u64) >> 1) as i64
        };
        let host = RecordBatch::try_from_iter(vec![
            ("k", keys),
            ("w0", Arc::new(Int64Array::from(vec![7, 0])) as ArrayRef),
            ("w1", Arc::new(Int64Array::from(vec![2, 0])) as ArrayRef),
            ("w2", Arc::new(Int64Array::from(vec![0, 0])) as ArrayRef),
            ("w3", Arc::new(Int64Array::from(vec![3, 1])) as ArrayRef),
            (
                "w4",
                Arc::new(Int64Array::from(vec![ordered(-2.5), i64::MIN])) as ArrayRef,
            ),
            ("w5", Arc::new(Int64Array::from(vec![1, 0])) as ArrayRef),
        ])
        .unwrap();
        let aggregates = [
            Agg {
                func: AggFunc::Sum,
                input: AggInput::Int(1),
            },
            Agg {
                func: AggFunc::Count,
                input: AggInput::Rows,
            },
            Agg {
                func: AggFunc::Max,
                input: AggInput::Float(2),
            },
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("a0", DataType::Int64, true),
            Field::new("a1", DataType::Int64, true),
            Field::new("a2", DataType::Float64, true),
        ]));
        let out = results_from_words(&host, 1, &aggregates, schema).unwrap();
        let ints = |c: usize| {
            out.column(c)
                .as_primitive::<Int64Type>()
                .iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(ints(1), vec![Some(7), None]);
        assert_eq!(ints(2), vec![Some(3), Some(1)]);
        let floats: Vec<_> = out
            .column(3)
            .as_primitive::<arrow::datatypes::Float64Type>()
            .iter()
            .collect();
        assert_eq!(floats, vec![Some(-2.5), None]);
    }
}
