//! `CpuBackend`: the always-available reference backend.

mod digits;
mod filter_project;
mod grouped;
mod hash_join;
mod join;
mod vector_distance;

use std::borrow::Cow;

use arrow::array::{ArrayRef, Float64Array};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use oxidelake_core::{BackendKind, DeviceId, EngineError};
use oxidelake_memory::{AlignedBuf, HostAllocator, HostMemory};

#[cfg(test)]
pub(crate) use filter_project::mask as filter_mask;
pub(crate) use hash_join::CpuJoinTable;

use crate::backend::{check_copy_fits, check_copy_lengths, host_null_count, host_widen_images};
use crate::device_batch::Widening;
use crate::handles::{DeviceMem, StreamInner, foreign_handle};
use crate::ops::validate;
use crate::ops::{
    AggregateArgs, EvaluateArgs, HostFilterArgs, JoinArgs, JoinKey, Predicate, ProjectedColumn,
    VectorDistanceArgs,
};
use crate::{
    DeviceBatch, DeviceBuffer, DeviceMemory, DeviceStream, GpuBackend, HostBuffer, JoinTable,
    MemoryInfo,
};

/// The CPU as a backend: device memory is aligned host memory, copies are `memcpy`,
/// streams execute synchronously, kernels are Arrow compute kernels plus rayon.
#[derive(Debug, Clone)]
pub struct CpuBackend {
    host: HostAllocator,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    /// The CPU backend. Its transfer buffers are pageable: there is no DMA engine to pin
    /// them for.
    pub fn new() -> Self {
        Self {
            host: HostAllocator::pageable("the CPU backend has no DMA engine to pin memory for"),
        }
    }

    fn host_bytes<'a>(&self, buf: &'a DeviceBuffer) -> Result<&'a [u8], EngineError> {
        match &buf.mem {
            DeviceMem::Host(b) if buf.device == DeviceId::CPU => Ok(b.as_slice()),
            _ => Err(foreign_handle(DeviceId::CPU, buf.device, "device buffer")),
        }
    }

    /// `batch` as a host batch: itself, or (for device columns in this backend's memory,
    /// made by [`crate::device_batch::upload_columns`]) copied out.
    fn host_of<'a>(
        &self,
        stream: &DeviceStream,
        batch: &'a DeviceBatch,
    ) -> Result<Cow<'a, RecordBatch>, EngineError> {
        self.check_stream(stream)?;
        match batch.as_host() {
            Some(host) => Ok(Cow::Borrowed(host)),
            None => crate::device_batch::download(self, stream, batch).map(Cow::Owned),
        }
    }

    fn check_stream(&self, stream: &DeviceStream) -> Result<(), EngineError> {
        match stream.inner {
            StreamInner::Cpu if stream.device == DeviceId::CPU => Ok(()),
            #[allow(unreachable_patterns)]
            _ => Err(foreign_handle(DeviceId::CPU, stream.device, "stream")),
        }
    }
}

/// Reads `MemTotal` and `MemAvailable` from `/proc/meminfo` text.
fn parse_meminfo(text: &str) -> Option<MemoryInfo> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
    };
    Some(MemoryInfo {
        total_bytes: field("MemTotal:")?,
        free_bytes: field("MemAvailable:")?,
    })
}

impl DeviceMemory for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::CpuSimd
    }

    fn device(&self) -> DeviceId {
        DeviceId::CPU
    }

    fn keeps_batches_on_host(&self) -> bool {
        true
    }

    fn memory_info(&self) -> Result<MemoryInfo, EngineError> {
        let text = std::fs::read_to_string("/proc/meminfo").map_err(|e| {
            EngineError::unsupported(
                "host memory info",
                format!("/proc/meminfo is not readable on this platform: {e}"),
            )
        })?;
        parse_meminfo(&text).ok_or_else(|| EngineError::Format {
            path: "/proc/meminfo".into(),
            detail: "MemTotal or MemAvailable missing".into(),
            source: None,
        })
    }

    fn alloc_device(&self, bytes: usize) -> Result<DeviceBuffer, EngineError> {
        let buf = AlignedBuf::device_bound(bytes)?;
        Ok(DeviceBuffer {
            device: DeviceId::CPU,
            len_bytes: bytes,
            address: buf.as_ptr() as usize,
            mem: DeviceMem::Host(buf),
        })
    }

    fn alloc_pinned_host(&self, bytes: usize) -> Result<HostBuffer, EngineError> {
        let mem: HostMemory = self.host.alloc(bytes)?;
        Ok(HostBuffer::new(DeviceId::CPU, mem))
    }

    fn create_stream(&self) -> Result<DeviceStream, EngineError> {
        Ok(DeviceStream {
            device: DeviceId::CPU,
            inner: StreamInner::Cpu,
        })
    }

    fn copy_h2d(
        &self,
        stream: &DeviceStream,
        src: &HostBuffer,
        dst: &mut DeviceBuffer,
    ) -> Result<(), EngineError> {
        self.check_stream(stream)?;
        check_copy_fits(src.len(), dst.len())?;
        let src_bytes = src.as_slice()?;
        match &mut dst.mem {
            DeviceMem::Host(b) if dst.device == DeviceId::CPU => {
                b.as_mut_slice()[..src_bytes.len()].copy_from_slice(src_bytes);
                Ok(())
            }
            #[allow(unreachable_patterns)]
            _ => Err(foreign_handle(DeviceId::CPU, dst.device, "device buffer")),
        }
    }

    fn copy_d2h(
        &self,
        stream: &DeviceStream,
        src: &DeviceBuffer,
        dst: &mut HostBuffer,
    ) -> Result<(), EngineError> {
        self.check_stream(stream)?;
        check_copy_lengths(src.len(), dst.len())?;
        let bytes = self.host_bytes(src)?;
        dst.as_mut_slice()?.copy_from_slice(bytes);
        Ok(())
    }

    fn synchronize(&self, stream: &DeviceStream) -> Result<(), EngineError> {
        // Every CPU operation completed before it returned.
        self.check_stream(stream)
    }

    fn null_count(
        &self,
        stream: &DeviceStream,
        validity: &DeviceBuffer,
        offset_bits: usize,
        len_bits: usize,
    ) -> Result<u64, EngineError> {
        self.check_stream(stream)?;
        host_null_count(self.host_bytes(validity)?, offset_bits, len_bits)
    }
}

impl GpuBackend for CpuBackend {
    fn filter_project(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        predicates: &[Predicate],
        projection: &[usize],
    ) -> Result<DeviceBatch, EngineError> {
        let host = self.host_of(stream, batch)?;
        filter_project::filter_project(HostFilterArgs {
            batch: &host,
            predicates,
            projection,
        })
        .map(DeviceBatch::host)
    }

    fn evaluate(
        &self,
        stream: &DeviceStream,
        args: EvaluateArgs<'_>,
    ) -> Result<DeviceBatch, EngineError> {
        let host = self.host_of(stream, args.batch)?;
        let computed = crate::value::evaluate_on_host(&host, args.columns)?;
        let columns = args
            .outputs
            .iter()
            .map(|output| {
                let column = match output {
                    ProjectedColumn::Input(i) => host.columns().get(*i),
                    ProjectedColumn::Computed(i) => computed.get(*i),
                };
                column.cloned().ok_or_else(|| EngineError::InvalidArgument {
                    what: "projection output",
                    detail: format!("{output:?} does not exist"),
                })
            })
            .collect::<Result<Vec<ArrayRef>, EngineError>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(host.num_rows()));
        Ok(DeviceBatch::host(RecordBatch::try_new_with_options(
            std::sync::Arc::clone(args.schema),
            columns,
            &options,
        )?))
    }

    fn aggregate(
        &self,
        stream: &DeviceStream,
        args: AggregateArgs<'_>,
    ) -> Result<RecordBatch, EngineError> {
        crate::ops::check_aggregates(
            args.batch.schema().fields().len(),
            args.keys,
            args.aggregates,
        )?;
        let host = self.host_of(stream, args.batch)?;
        grouped::aggregate(&host, &args)
    }

    fn build_join_table(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        key: JoinKey<'_>,
    ) -> Result<JoinTable, EngineError> {
        let host = self.host_of(stream, batch)?;
        let keys = join::join_keys(&host, key)?;
        let table = CpuJoinTable::build(&keys)?;
        Ok(JoinTable::new(
            DeviceId::CPU,
            keys.len(),
            table.allocated_bytes(),
            table,
        ))
    }

    fn join(
        &self,
        stream: &DeviceStream,
        table: &JoinTable,
        args: JoinArgs<'_>,
    ) -> Result<DeviceBatch, EngineError> {
        let build = (args.build.map(|b| self.host_of(stream, b))).transpose()?;
        let probe = self.host_of(stream, args.probe)?;
        let table = table.table_on::<CpuJoinTable>(DeviceId::CPU)?;
        join::join(table, build.as_deref(), &probe, &args).map(DeviceBatch::host)
    }

    fn append(
        &self,
        stream: &DeviceStream,
        batches: &[DeviceBatch],
        schema: arrow::datatypes::SchemaRef,
    ) -> Result<DeviceBatch, EngineError> {
        let hosts = batches
            .iter()
            .map(|b| self.host_of(stream, b))
            .collect::<Result<Vec<_>, _>>()?;
        let batches = hosts.iter().map(|h| h.as_ref());
        Ok(DeviceBatch::host(arrow::compute::concat_batches(
            &schema, batches,
        )?))
    }

    fn widen_images(
        &self,
        stream: &DeviceStream,
        memory: &mut DeviceBuffer,
        widenings: &[Widening],
    ) -> Result<(), EngineError> {
        self.check_stream(stream)?;
        validate::widenings(memory.len(), widenings)?;
        match &mut memory.mem {
            DeviceMem::Host(b) if memory.device == DeviceId::CPU => {
                host_widen_images(b.as_mut_slice(), widenings);
                Ok(())
            }
            #[allow(unreachable_patterns)]
            _ => Err(foreign_handle(
                DeviceId::CPU,
                memory.device,
                "device buffer",
            )),
        }
    }

    fn vector_distance(
        &self,
        stream: &DeviceStream,
        args: VectorDistanceArgs<'_>,
    ) -> Result<Float64Array, EngineError> {
        self.check_stream(stream)?;
        vector_distance::vector_distance(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxidelake_memory::MemoryClass;

    fn upload(backend: &dyn GpuBackend, bytes: &[u8]) -> (DeviceStream, DeviceBuffer) {
        let stream = backend.create_stream().unwrap();
        let mut host = backend.alloc_pinned_host(bytes.len()).unwrap();
        host.as_mut_slice().unwrap().copy_from_slice(bytes);
        let mut dev = backend.alloc_device(bytes.len()).unwrap();
        backend.copy_h2d(&stream, &host, &mut dev).unwrap();
        (stream, dev)
    }

    #[test]
    fn device_buffers_are_128_byte_aligned() {
        let cpu = CpuBackend::new();
        for len in [0, 1, 100, 4096] {
            assert_eq!(cpu.alloc_device(len).unwrap().address() % 128, 0);
        }
    }

    #[test]
    fn bytes_survive_a_host_device_host_round_trip() {
        let cpu = CpuBackend::new();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (stream, dev) = upload(&cpu, &data);
        let mut back = cpu.alloc_pinned_host(data.len()).unwrap();
        cpu.copy_d2h(&stream, &dev, &mut back).unwrap();
        cpu.synchronize(&stream).unwrap();
        assert_eq!(back.as_slice().unwrap(), &data[..]);
        assert_eq!(back.memory_class(), MemoryClass::Pageable);
    }

    #[test]
    fn an_upload_fills_the_start_of_a_longer_buffer_and_other_lengths_are_rejected() {
        let cpu = CpuBackend::new();
        let stream = cpu.create_stream().unwrap();
        let copy_length = |err: EngineError| {
            matches!(
                err,
                EngineError::InvalidArgument {
                    what: "copy length",
                    ..
                }
            )
        };
        let mut host = cpu.alloc_pinned_host(10).unwrap();
        host.as_mut_slice().unwrap().fill(9);
        let mut longer = cpu.alloc_device(11).unwrap();
        cpu.copy_h2d(&stream, &host, &mut longer).unwrap();
        let mut back = cpu.alloc_pinned_host(11).unwrap();
        cpu.copy_d2h(&stream, &longer, &mut back).unwrap();
        assert_eq!(back.as_slice().unwrap(), &[9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0]);
        let mut shorter = cpu.alloc_device(9).unwrap();
        assert!(copy_length(
            cpu.copy_h2d(&stream, &host, &mut shorter).unwrap_err()
        ));
        assert!(copy_length(
            cpu.copy_d2h(&stream, &longer, &mut host).unwrap_err()
        ));
    }

    #[test]
    fn a_widening_outside_its_allocation_or_over_any_offsets_is_refused_and_apart_ones_widen() {
        use crate::device_batch::Span;
        let cpu = CpuBackend::new();
        let stream = cpu.create_stream().unwrap();
        let mut memory = cpu.alloc_device(1024).unwrap();
        let span = |offset, len| Span { offset, len };
        let widening = |narrow, width, images| Widening {
            narrow,
            width,
            base: 0,
            images,
        };
        let a = widening(span(0, 10), 1, span(128, 80));
        for (bad, why) in [
            (
                vec![widening(span(0, 30), 3, span(128, 80))],
                "a 3-byte offset",
            ),
            (
                vec![widening(span(0, 20), 2, span(128, 88))],
                "rows disagree",
            ),
            (
                vec![widening(span(0, 100), 1, span(960, 800))],
                "images past the end",
            ),
            (
                vec![widening(span(128, 10), 1, span(128, 80))],
                "overlapping spans",
            ),
            (
                vec![widening(span(1, 20), 2, span(128, 80))],
                "unaligned offsets",
            ),
            (
                vec![a, widening(span(256, 10), 1, span(0, 80))],
                "images over offsets",
            ),
        ] {
            let err = cpu.widen_images(&stream, &mut memory, &bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    EngineError::InvalidArgument {
                        what: "image widening",
                        ..
                    }
                ),
                "{why}: {err}"
            );
        }
        // Apart, they widen: offsets 0..10 from bases -5 and i64::MAX - 4 (wrapping).
        let mut host = cpu.alloc_pinned_host(1024).unwrap();
        for (i, byte) in host.as_mut_slice().unwrap().iter_mut().enumerate() {
            *byte = (i % 128) as u8;
        }
        cpu.copy_h2d(&stream, &host, &mut memory).unwrap();
        let b = Widening {
            base: i64::MAX - 4,
            ..widening(span(256, 10), 1, span(384, 80))
        };
        let a = Widening { base: -5, ..a };
        cpu.widen_images(&stream, &mut memory, &[a, b]).unwrap();
        cpu.copy_d2h(&stream, &memory, &mut host).unwrap();
        let images = |at: usize| -> Vec<i64> {
            host.as_slice().unwrap()[at..at + 80]
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        assert_eq!(images(128), (-5..5).collect::<Vec<i64>>());
        let top: Vec<i64> = (0..10u64)
            .map(|o| ((i64::MAX - 4) as u64).wrapping_add(o) as i64)
            .collect();
        assert_eq!(images(384), top);
    }

    #[test]
    fn null_count_matches_arrow_for_any_offset_and_length() {
        let cpu = CpuBackend::new();
        let validity: Vec<u8> = (0..37u32).map(|i| (i * 97 % 256) as u8).collect();
        let (stream, dev) = upload(&cpu, &validity);
        let buffer = arrow::buffer::Buffer::from_slice_ref(&validity);
        for (offset, len) in [(0, 0), (0, 296), (3, 200), (7, 1), (13, 283)] {
            let expected = (len - buffer.count_set_bits_offset(offset, len)) as u64;
            assert_eq!(
                cpu.null_count(&stream, &dev, offset, len).unwrap(),
                expected,
                "{offset}+{len}"
            );
        }
        assert!(
            cpu.null_count(&stream, &dev, 290, 7).is_err(),
            "range past the bitmap"
        );
    }

    #[test]
    fn meminfo_parsing_reads_total_and_available() {
        let text = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   20000000 kB\n";
        let info = parse_meminfo(text).unwrap();
        assert_eq!(info.total_bytes, 24_000_000 * 1024);
        assert_eq!(info.free_bytes, 20_000_000 * 1024);
        assert!(parse_meminfo("MemTotal: 1 kB\n").is_none());
    }
}
