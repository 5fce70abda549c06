//! The batches every backend operator takes and returns (ADR-0014, ADR-0015).
//!
//! A [`DeviceBatch`] is a host batch wrapped without a copy on a backend whose memory is
//! the host's (the CPU backend), and otherwise its columns in device memory
//! ([`DeviceColumns`]), in the form the kernels read:
//!
//! - numbers, dates, times, timestamps, durations, booleans and decimals as 8-byte images
//!   ([`crate::ops::write_images`]; floats as `f64` bits). A decimal column is held as
//!   images only when every value of the batch fits 64 bits, which keeps the images
//!   exact; a batch holding a wider value keeps that column as 16-byte values
//!   ([`ValueLayout::Wide`]), which no kernel reads: an operator needing it refuses the
//!   batch, which goes on by the host path;
//! - strings as `i32` offsets starting at 0 and their bytes (dictionaries, views and
//!   large strings materialised as `Utf8` first);
//! - validity as a bitmap whose bit 0 is row 0, for columns with NULLs only.
//!
//! The whole batch is one device allocation, filled by one host-to-device copy from one
//! staging buffer, and read back by one device-to-host copy, so a transition costs one
//! copy per batch and direction whatever the column count. What crosses on the way up
//! can be narrower than what the kernels read: a column of images whose valid values
//! lie within 2^32 of each other crosses as 1-, 2- or 4-byte offsets from the smallest
//! ([`Widening`]), and the backend widens them into the column's images after the copy
//! ([`GpuBackend::widen_images`]), where that saves at least 64 KiB (`upload`). Each column keeps its Arrow
//! type, and [`download`] restores it with the same values and NULLs for every
//! [`is_device_type`]. Three things are equal only logically: a dictionary column
//! comes back re-encoded (its own keys and no unused values), a NaN's payload may be
//! quieted, and a validity bitmap without an unset bit comes back as no bitmap.
//!
//! Every allocation is rounded up to a [`size_class`], so that a transition's
//! [`StagingPool`] can hand the same staging buffer to batches of similar size (a copy
//! moves a whole buffer).
//!
//! [`upload_columns`] and [`download`] use only the backend's primitives (allocation,
//! copies, synchronisation), so every GPU backend moves batches the same way; [`upload`]
//! wraps the host batch instead where the backend keeps its batches on the host (on the
//! CPU backend `upload_columns` still works, into 128-byte-aligned host memory with
//! `memcpy` copies: the form's own tests use it).

use std::ops::Range;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use oxidelake_core::{BackendKind, EngineError, MemoryTier, TelemetryHub};

use crate::ops::value_class;
use crate::{DeviceBuffer, GpuBackend, HostBuffer};

mod device_pool;
mod download;
mod staging;
mod upload;

pub use device_pool::{DevicePool, DevicePoolStats};
#[cfg(feature = "cuda")]
pub(crate) use download::{column_from_spans, copy_back};
pub use download::{download, download_columns, download_with};
pub use staging::{StagingPool, size_class};
pub use upload::{upload, upload_columns, upload_with};

/// Where each part of a resident batch starts in its allocation.
const ALIGN: usize = 128;

/// A byte range of a resident batch's allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First byte, a multiple of 128.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Span {
    fn range(self) -> Range<usize> {
        self.offset..self.offset + self.len
    }
}

/// An upload's narrow images, widened on the device (module docs): `narrow` holds one
/// unsigned `width`-byte offset a row, and `images` receives `base + offset` as the
/// row's 8-byte image (wrapping, as the host's subtraction did, so every image comes
/// back exact). Both spans lie in the batch's allocation, apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widening {
    /// The offsets as they crossed the bus: `rows * width` bytes.
    pub narrow: Span,
    /// Bytes an offset: 1, 2 or 4.
    pub width: usize,
    /// The image an offset of 0 stands for (the smallest valid image of the column).
    pub base: i64,
    /// Where the images go: `rows * 8` bytes.
    pub images: Span,
}

impl Widening {
    /// Rows it widens.
    pub fn rows(&self) -> usize {
        self.images.len / 8
    }
}

/// How a resident column's values are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueLayout {
    /// One 8-byte image per row.
    Images(Span),
    /// One 16-byte little-endian `i128` per row: a decimal column of a batch holding a
    /// value beyond 64 bits. No kernel reads it; an operator that needs the column
    /// refuses the batch, which goes on by the host path.
    Wide(Span),
    /// `rows + 1` `i32` offsets from 0, then the bytes they index.
    Strings {
        /// The offsets.
        offsets: Span,
        /// The bytes.
        bytes: Span,
    },
}

/// One column of a [`DeviceBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceColumn {
    /// The column's Arrow type, restored on download.
    pub data_type: DataType,
    /// Its values.
    pub values: ValueLayout,
    /// Its validity bitmap (bit 0 = row 0): present when the column may hold NULLs (an
    /// upload leaves it out for a column without any; a filter's output keeps it).
    pub validity: Option<Span>,
}

/// A device batch's bytes in the telemetry hub's device-tier gauge, from the batch's
/// creation to its drop (not on the CPU backend, whose "device" is host memory).
#[derive(Debug)]
struct HeldOnDevice(i64);

impl HeldOnDevice {
    fn new(memory: &DeviceBuffer) -> Self {
        if memory.device().kind == BackendKind::CpuSimd {
            return Self(0);
        }
        let bytes = i64::try_from(memory.len()).unwrap_or(i64::MAX);
        TelemetryHub::global().add_tier_bytes(MemoryTier::Device, bytes);
        Self(bytes)
    }
}

impl Drop for HeldOnDevice {
    fn drop(&mut self) {
        if self.0 != 0 {
            TelemetryHub::global().add_tier_bytes(MemoryTier::Device, -self.0);
        }
    }
}

/// The columns of a batch in one allocation on a device, in the kernels' form (the
/// module docs). Its allocation counts in the telemetry hub's device tier while it lives
/// (on a GPU backend), and goes back to its backend's [`DevicePool`] when it is dropped,
/// if it came from one.
#[derive(Debug)]
pub struct DeviceColumns {
    schema: SchemaRef,
    rows: usize,
    columns: Vec<DeviceColumn>,
    memory: std::mem::ManuallyDrop<DeviceBuffer>,
    pool: Option<Arc<DevicePool>>,
    uploaded: usize,
    _held: HeldOnDevice,
}

impl Drop for DeviceColumns {
    fn drop(&mut self) {
        // SAFETY: `memory` is taken once, here, and never used again: the columns are
        // being dropped and no other field refers to it.
        #[allow(unsafe_code)]
        let memory = unsafe { std::mem::ManuallyDrop::take(&mut self.memory) };
        if let Some(pool) = &self.pool {
            pool.give(memory);
        }
    }
}

impl DeviceColumns {
    /// Columns a backend built on the device: `columns` lie in `memory` (sized by
    /// [`Layout::size`]), which goes back to `pool` when they are dropped.
    pub(crate) fn from_parts(
        schema: SchemaRef,
        rows: usize,
        columns: Vec<DeviceColumn>,
        memory: DeviceBuffer,
        pool: Option<Arc<DevicePool>>,
    ) -> Self {
        let held = HeldOnDevice::new(&memory);
        Self {
            schema,
            rows,
            columns,
            memory: std::mem::ManuallyDrop::new(memory),
            pool,
            uploaded: 0,
            _held: held,
        }
    }

    /// The columns as an upload made them, having copied `bytes` to the device.
    pub(crate) fn uploaded(mut self, bytes: usize) -> Self {
        self.uploaded = bytes;
        self
    }

    /// The batch's schema (the host batch's, types included).
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Rows in the batch.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// The columns' layouts in [`Self::memory`].
    pub fn columns(&self) -> &[DeviceColumn] {
        &self.columns
    }

    /// The allocation holding every column.
    pub fn memory(&self) -> &DeviceBuffer {
        &self.memory
    }

    /// Bytes one copy of the batch moves (its whole allocation).
    pub fn bytes(&self) -> usize {
        self.memory.len()
    }

    /// Bytes the upload that made the batch copied to the device (fewer than
    /// [`Self::bytes`] where columns crossed narrow); 0 for a batch an operator built on
    /// the device.
    pub fn uploaded_bytes(&self) -> usize {
        self.uploaded
    }
}

/// The batch every backend operator takes and returns (ADR-0015): on a GPU backend its
/// columns in device memory ([`DeviceColumns`]), on a backend whose memory is the host's
/// (the CPU backend) the host batch itself, wrapped without a copy, so the CPU reference
/// path pays nothing for the one interface. [`upload`] makes one in the form its backend
/// keeps, [`download`] gives the host batch back.
#[derive(Debug)]
pub struct DeviceBatch(Form);

#[derive(Debug)]
enum Form {
    Host(arrow::record_batch::RecordBatch),
    Device(DeviceColumns),
}

impl DeviceBatch {
    /// A host batch in the form a host-memory backend keeps (no copy).
    pub fn host(batch: arrow::record_batch::RecordBatch) -> Self {
        Self(Form::Host(batch))
    }

    /// The batch's schema.
    pub fn schema(&self) -> SchemaRef {
        match &self.0 {
            Form::Host(batch) => batch.schema(),
            Form::Device(columns) => columns.schema(),
        }
    }

    /// Rows in the batch.
    pub fn num_rows(&self) -> usize {
        match &self.0 {
            Form::Host(batch) => batch.num_rows(),
            Form::Device(columns) => columns.num_rows(),
        }
    }

    /// Bytes one copy of the batch moves across the bus: its device allocation, none for
    /// a batch in host memory (nothing crosses).
    pub fn bytes(&self) -> usize {
        match &self.0 {
            Form::Host(_) => 0,
            Form::Device(columns) => columns.bytes(),
        }
    }

    /// Bytes the upload that made the batch copied to the device: none for a batch in
    /// host memory or one an operator built on the device
    /// ([`DeviceColumns::uploaded_bytes`]).
    pub fn uploaded_bytes(&self) -> usize {
        match &self.0 {
            Form::Host(_) => 0,
            Form::Device(columns) => columns.uploaded_bytes(),
        }
    }

    /// The host batch, where the batch is in host memory.
    pub fn as_host(&self) -> Option<&arrow::record_batch::RecordBatch> {
        match &self.0 {
            Form::Host(batch) => Some(batch),
            Form::Device(_) => None,
        }
    }

    /// The device columns, where the batch is on a device.
    pub fn on_device(&self) -> Option<&DeviceColumns> {
        match &self.0 {
            Form::Host(_) => None,
            Form::Device(columns) => Some(columns),
        }
    }
}

impl From<DeviceColumns> for DeviceBatch {
    fn from(columns: DeviceColumns) -> Self {
        Self(Form::Device(columns))
    }
}

/// Whether a column of type `dt` can live in a [`DeviceBatch`]: the types the filter's
/// images and strings cover (decimals of any precision: as images while the values fit
/// 64 bits, as [`ValueLayout::Wide`] otherwise).
pub fn is_device_type(dt: &DataType) -> bool {
    value_class(dt).is_some()
}

/// The first column of `schema` that cannot live on a device, as `Unsupported`.
pub fn check_device_schema(schema: &arrow::datatypes::Schema) -> Result<(), EngineError> {
    match schema
        .fields()
        .iter()
        .find(|f| !is_device_type(f.data_type()))
    {
        Some(field) => Err(EngineError::unsupported(
            "device-resident batch",
            format!(
                "column {} is {}, which a device batch does not hold",
                field.name(),
                field.data_type()
            ),
        )),
        None => Ok(()),
    }
}

/// Rounds `n` up to the next multiple of [`ALIGN`].
fn aligned(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Hands out 128-byte-aligned spans one after the other.
pub(crate) struct Layout {
    end: usize,
}

impl Layout {
    pub(crate) fn new() -> Self {
        Self { end: 0 }
    }

    /// Bytes an allocation holding every span needs: the [`size_class`] of their end
    /// (never empty: copies and allocations need a non-empty buffer on every backend).
    pub(crate) fn size(&self) -> usize {
        size_class(self.end)
    }

    /// The layout of a column shaped like `column` holding `rows` rows whose strings
    /// (for a string column) hold `string_bytes` bytes.
    #[cfg(feature = "cuda")]
    pub(crate) fn column_like(
        &mut self,
        column: &DeviceColumn,
        rows: usize,
        string_bytes: usize,
    ) -> DeviceColumn {
        let values = match column.values {
            ValueLayout::Images(_) => ValueLayout::Images(self.take(rows * 8)),
            ValueLayout::Wide(_) => ValueLayout::Wide(self.take(rows * 16)),
            ValueLayout::Strings { .. } => ValueLayout::Strings {
                offsets: self.take((rows + 1) * 4),
                bytes: self.take(string_bytes),
            },
        };
        DeviceColumn {
            data_type: column.data_type.clone(),
            values,
            validity: column.validity.map(|_| self.take(rows.div_ceil(8))),
        }
    }

    pub(crate) fn take(&mut self, len: usize) -> Span {
        let span = Span {
            offset: self.end,
            len,
        };
        self.end = aligned(self.end + len);
        span
    }
}

/// A staging buffer of `bytes` from `pool`, or a new one without a pool.
pub(super) fn staging_buffer(
    backend: &dyn GpuBackend,
    pool: Option<&StagingPool>,
    bytes: usize,
) -> Result<HostBuffer, EngineError> {
    match pool {
        Some(pool) => pool.take(backend, bytes),
        None => backend.alloc_pinned_host(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use crate::DeviceMemory;
    use arrow::array::{
        Array, ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray,
        Float32Array, Float64Array, Int8Array, Int32Array, StringArray, StringViewArray,
        Time64NanosecondArray, TimestampMicrosecondArray, UInt32Array, make_array,
    };
    use arrow::buffer::NullBuffer;
    use arrow::datatypes::{Decimal128Type, Field, Int32Type, Schema, TimeUnit};
    use arrow::record_batch::RecordBatch;

    fn sample() -> RecordBatch {
        let dict: DictionaryArray<Int32Type> =
            vec![Some("x"), None, Some("y"), Some("x"), Some("zz")]
                .into_iter()
                .collect();
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "i8",
                Arc::new(Int8Array::from(vec![
                    Some(-3),
                    None,
                    Some(127),
                    Some(0),
                    Some(-128),
                ])),
            ),
            (
                "i32",
                Arc::new(Int32Array::from(vec![1, 2, 3, 4, i32::MIN])),
            ),
            (
                "u32",
                Arc::new(UInt32Array::from(vec![0, u32::MAX, 7, 8, 9])),
            ),
            (
                "d",
                Arc::new(Date32Array::from(vec![
                    Some(9000),
                    Some(-1),
                    None,
                    Some(0),
                    Some(1),
                ])),
            ),
            (
                "ts",
                Arc::new(
                    TimestampMicrosecondArray::from(vec![1, 2, 3, 4, i64::MAX])
                        .with_timezone("UTC"),
                ),
            ),
            (
                "t",
                Arc::new(Time64NanosecondArray::from(vec![5, 6, 7, 8, 9])),
            ),
            (
                "b",
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    Some(false),
                    None,
                    Some(true),
                    Some(false),
                ])),
            ),
            (
                "f32",
                Arc::new(Float32Array::from(vec![
                    1.5,
                    -0.0,
                    f32::NAN,
                    f32::INFINITY,
                    3.25,
                ])),
            ),
            (
                "f64",
                Arc::new(Float64Array::from(vec![
                    Some(0.1),
                    None,
                    Some(-2.5),
                    Some(1e300),
                    Some(7.0),
                ])),
            ),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from(vec![
                        Some(123),
                        None,
                        Some(-99_999),
                        Some(10i128.pow(17)),
                        Some(0),
                    ])
                    .with_precision_and_scale(18, 2)
                    .unwrap(),
                ),
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![
                    Some("alpha"),
                    None,
                    Some(""),
                    Some("δέλτα"),
                    Some("e"),
                ])),
            ),
            (
                "sv",
                Arc::new(StringViewArray::from(vec![
                    Some("a long string past twelve bytes"),
                    Some("b"),
                    None,
                    Some(""),
                    Some("c"),
                ])),
            ),
            ("dict", Arc::new(dict)),
        ];
        RecordBatch::try_from_iter(columns).unwrap()
    }

    /// `batch` in the device form (in the CPU backend's memory) and back.
    fn round_trip(batch: &RecordBatch) -> (DeviceColumns, RecordBatch) {
        let cpu = CpuBackend::new();
        let stream = cpu.create_stream().unwrap();
        let resident = upload_columns(&cpu, &stream, batch, None).unwrap();
        let back = download::copy_back(&cpu, &stream, &resident, None).unwrap();
        (resident, back)
    }

    /// Float columns compared by bits (NaN != NaN under `==`).
    fn assert_same(batch: &RecordBatch, back: &RecordBatch) {
        assert_eq!(back.schema(), batch.schema());
        for (i, (a, b)) in batch.columns().iter().zip(back.columns()).enumerate() {
            let (a, b) = (a.to_data(), b.to_data());
            let same = match a.data_type() {
                DataType::Float32 | DataType::Float64 => {
                    format!("{:?}", make_array(a.clone())) == format!("{:?}", make_array(b.clone()))
                }
                _ => make_array(a.clone()).as_ref() == make_array(b.clone()).as_ref(),
            };
            assert!(
                same,
                "column {i} ({}) changed: {a:?} → {b:?}",
                a.data_type()
            );
        }
    }

    #[test]
    fn every_resident_type_comes_back_from_the_device_with_its_type_values_and_nulls() {
        let batch = sample();
        let (resident, back) = round_trip(&batch);
        assert_same(&batch, &back);
        assert_eq!(resident.num_rows(), 5);
        assert_eq!(resident.columns().len(), batch.num_columns());
    }

    #[test]
    fn a_sliced_batch_round_trips_with_offsets_from_zero_and_repacked_validity() {
        let batch = sample().slice(1, 3);
        let (resident, back) = round_trip(&batch);
        assert_same(&batch, &back);
        let s = &resident.columns()[10];
        let ValueLayout::Strings { offsets, .. } = s.values else {
            panic!("strings expected: {s:?}");
        };
        let cpu = CpuBackend::new();
        let stream = cpu.create_stream().unwrap();
        let mut host = cpu.alloc_pinned_host(resident.memory().len()).unwrap();
        cpu.copy_d2h(&stream, resident.memory(), &mut host).unwrap();
        let first = &host.as_slice().unwrap()[offsets.offset..offsets.offset + 4];
        assert_eq!(first, &0i32.to_le_bytes());
    }

    #[test]
    fn parts_start_on_128_byte_boundaries_and_only_columns_with_nulls_carry_validity() {
        let (resident, _) = round_trip(&sample());
        for column in resident.columns() {
            let spans = match column.values {
                ValueLayout::Images(s) | ValueLayout::Wide(s) => vec![s],
                ValueLayout::Strings { offsets, bytes } => vec![offsets, bytes],
            };
            for span in spans.into_iter().chain(column.validity) {
                assert_eq!(span.offset % ALIGN, 0, "{column:?}");
                assert!(span.offset + span.len <= resident.bytes());
            }
        }
        let with_nulls = sample()
            .columns()
            .iter()
            .map(|c| c.logical_null_count() > 0)
            .collect::<Vec<_>>();
        let with_validity = resident
            .columns()
            .iter()
            .map(|c| c.validity.is_some())
            .collect::<Vec<_>>();
        assert_eq!(with_validity, with_nulls);
    }

    #[test]
    fn an_empty_batch_round_trips() {
        let batch = sample().slice(0, 0);
        let (resident, back) = round_trip(&batch);
        assert_eq!(back.num_rows(), 0);
        assert_eq!(back.schema(), batch.schema());
        assert!(resident.bytes() >= ALIGN);
    }

    #[test]
    fn a_column_the_device_cannot_hold_is_refused_before_any_copy() {
        let unsigned = arrow::array::UInt64Array::from(vec![u64::MAX]);
        let list =
            arrow::array::ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![
                Some(1),
            ])]);
        for (name, column) in [
            ("unsigned", Arc::new(unsigned) as ArrayRef),
            ("list", Arc::new(list)),
        ] {
            let schema = Arc::new(Schema::new(vec![Field::new(
                name,
                column.data_type().clone(),
                true,
            )]));
            let batch = RecordBatch::try_new(schema, vec![column]).unwrap();
            let cpu = CpuBackend::new();
            let stream = cpu.create_stream().unwrap();
            let err = upload(&cpu, &stream, &batch).unwrap_err();
            assert!(
                matches!(&err, EngineError::Unsupported { detail, .. } if detail.contains(name)),
                "{err}"
            );
        }
    }

    /// A one-column batch of Decimal128(38, 4) values.
    fn wide_batch(values: Vec<Option<i128>>) -> RecordBatch {
        let column = Decimal128Array::from(values)
            .with_precision_and_scale(38, 4)
            .unwrap();
        RecordBatch::try_from_iter([("sum", Arc::new(column) as ArrayRef)]).unwrap()
    }

    #[test]
    fn a_wide_decimal_is_held_as_exact_images_while_its_values_fit_64_bits() {
        let batch = wide_batch(vec![Some(i128::from(i64::MAX)), None, Some(-5), Some(0)]);
        let (resident, back) = round_trip(&batch);
        assert!(matches!(
            resident.columns()[0].values,
            ValueLayout::Images(_)
        ));
        assert_same(&batch, &back);
    }

    #[test]
    fn a_wide_decimal_with_a_value_beyond_64_bits_is_held_as_16_byte_values_and_comes_back_exact() {
        let beyond = i128::from(i64::MAX) + 1;
        let batch = wide_batch(vec![Some(7), Some(-beyond * 1000), None, Some(beyond)]);
        let (resident, back) = round_trip(&batch);
        let column = &resident.columns()[0];
        assert!(matches!(column.values, ValueLayout::Wide(s) if s.len == 4 * 16));
        assert!(column.validity.is_some());
        assert_same(&batch, &back);
    }

    #[test]
    fn a_value_beyond_64_bits_under_a_null_keeps_the_images() {
        // Arrow leaves the value under a NULL unspecified: it must not decide the form.
        let values = Decimal128Array::new(
            vec![1i128, i128::MAX].into(),
            Some(NullBuffer::from(vec![true, false])),
        )
        .with_precision_and_scale(38, 0)
        .unwrap();
        let batch = RecordBatch::try_from_iter([("d", Arc::new(values) as ArrayRef)]).unwrap();
        let (resident, back) = round_trip(&batch);
        assert!(matches!(
            resident.columns()[0].values,
            ValueLayout::Images(_)
        ));
        let got = back.column(0).as_primitive::<Decimal128Type>();
        assert_eq!((got.value(0), got.is_null(1)), (1, true));
    }

    /// 40,000 rows: dates at most a thousand days apart (every tenth NULL over
    /// `i32::MIN`), keys spread past 32 bits, small integers, small decimals, floats.
    fn close_lying(rows: usize) -> RecordBatch {
        let dates: Vec<i32> = (0..rows)
            .map(|i| {
                if i % 10 == 0 {
                    i32::MIN
                } else {
                    9000 + (i % 1000) as i32
                }
            })
            .collect();
        let nulls = NullBuffer::from((0..rows).map(|i| i % 10 != 0).collect::<Vec<_>>());
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("d", Arc::new(Date32Array::new(dates.into(), Some(nulls)))),
            (
                "k",
                Arc::new(arrow::array::Int64Array::from_iter_values(
                    (0..rows as i64).map(|i| i << 20),
                )),
            ),
            (
                "s",
                Arc::new(Int8Array::from_iter_values(
                    (0..rows).map(|i| (i % 100) as i8 - 50),
                )),
            ),
            (
                "m",
                Arc::new(
                    Decimal128Array::from_iter_values((0..rows).map(|i| (i % 5000) as i128))
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
            ),
            (
                "f",
                Arc::new(Float64Array::from_iter_values(
                    (0..rows).map(|i| (i as f64).sqrt()),
                )),
            ),
        ];
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn close_lying_images_cross_as_narrow_offsets_and_come_back_exact() {
        let rows = 40_000;
        let batch = close_lying(rows);
        let cpu = CpuBackend::new();
        let stream = cpu.create_stream().unwrap();
        let pool = StagingPool::new(1);
        let resident = upload_columns(&cpu, &stream, &batch, Some(&pool)).unwrap();
        let back = download::copy_back(&cpu, &stream, &resident, None).unwrap();
        assert_same(&batch, &back);
        // What crossed: the dates as 2-byte offsets (the value under a NULL ignored)
        // and their validity, the keys and floats as images, the small integers as
        // 1-byte offsets, the decimals as 2-byte ones.
        let crossed: usize = [
            rows * 2,
            rows.div_ceil(8),
            rows * 8,
            rows,
            rows * 2,
            rows * 8,
        ]
        .into_iter()
        .map(aligned)
        .sum();
        let _staged = pool.take(&cpu, size_class(crossed)).unwrap();
        assert_eq!(pool.reused(), 1, "the staging buffer held only that");
        assert_eq!(resident.uploaded_bytes(), size_class(crossed));
        // On the device, the images of the three narrow columns after what crossed.
        assert_eq!(
            resident.bytes(),
            size_class(crossed + 3 * aligned(rows * 8))
        );
        assert!(
            resident
                .columns()
                .iter()
                .all(|c| matches!(c.values, ValueLayout::Images(s) if s.len == rows * 8))
        );
    }

    #[test]
    fn sliced_all_null_and_float_columns_narrow_and_come_back_exact() {
        let rows = 30_000;
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("none", Arc::new(Int32Array::from(vec![None; rows]))),
            (
                "ulps",
                Arc::new(Float64Array::from_iter_values(
                    (0..rows).map(|i| 1.0 + i as f64 * f64::EPSILON),
                )),
            ),
            (
                "some",
                Arc::new(Int32Array::from_iter(
                    (0..rows).map(|i| (i % 3 != 0).then_some((i % 1000) as i32)),
                )),
            ),
        ];
        let batch = RecordBatch::try_from_iter(columns)
            .unwrap()
            .slice(5_000, 20_000);
        let (resident, back) = round_trip(&batch);
        assert_same(&batch, &back);
        // One-byte offsets of nothing, two-byte offsets of neighbouring floats' bits and
        // of the small integers, and the two bitmaps.
        let n = batch.num_rows();
        let crossed: usize = [n, n.div_ceil(8), n * 2, n * 2, n.div_ceil(8)]
            .into_iter()
            .map(aligned)
            .sum();
        assert_eq!(resident.uploaded_bytes(), size_class(crossed));
    }

    #[test]
    fn a_column_whose_offsets_would_save_less_than_64_kib_crosses_as_images() {
        let rows = 9_000; // 1-byte offsets would save 63,000 bytes
        let batch = close_lying(rows).project(&[2]).unwrap();
        let cpu = CpuBackend::new();
        let stream = cpu.create_stream().unwrap();
        let pool = StagingPool::new(1);
        let resident = upload_columns(&cpu, &stream, &batch, Some(&pool)).unwrap();
        let _staged = pool.take(&cpu, size_class(aligned(rows * 8))).unwrap();
        assert_eq!(pool.reused(), 1, "the images crossed");
        assert_eq!(resident.bytes(), size_class(aligned(rows * 8)));
        let back = download::copy_back(&cpu, &stream, &resident, None).unwrap();
        assert_same(&batch, &back);
    }

    #[test]
    fn time_units_and_timezones_are_kept() {
        assert!(is_device_type(&DataType::Timestamp(
            TimeUnit::Nanosecond,
            Some("+02:00".into())
        )));
        assert!(is_device_type(&DataType::Decimal128(38, 4)));
        assert!(is_device_type(&DataType::Decimal128(18, 2)));
        assert!(!is_device_type(&DataType::UInt64));
    }
}
