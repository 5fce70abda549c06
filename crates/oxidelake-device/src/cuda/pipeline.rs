//! Double-buffered H2D / kernel / D2H pipelining for row-independent CUDA work.
//!
//! A batch is cut into chunks of the backend's chunk size (`BatchSizes::chunk_rows`)
//! that alternate between two lanes. Each lane owns a CUDA stream and its own pinned host
//! staging and device buffers, so while lane A copies chunk `c` to the device, runs its
//! kernels and copies the result back, lane B's chunk `c - 1` is in flight on the other
//! stream, and the host fills lane A's staging for chunk `c + 2` only after lane A's
//! previous chunk was collected. Operators coalesce their input to the backend's batch
//! size (`BatchSizes::batch_rows`, several chunks), so both lanes carry work.
//!
//! Ordering needs no explicit stream synchronisation: every pinned buffer carries the
//! event of its last asynchronous copy (cudarc records it), and reading or writing it
//! from the host waits for that event first. Results are collected in chunk order.
//!
//! Lanes and the second lane's stream come from the backend's [`LanePool`] and go back
//! to it at the end of the call, so a steady stream of equal-sized batches allocates
//! nothing after its first batch.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};
use oxidelake_core::EngineError;

use super::gpu::Dev;
use super::lane_pool::{LaneBytes, LaneKey, LaneState, Tracked};

/// A pinned host buffer paired with a device buffer of the same length.
pub(super) struct Staging<T: DeviceRepr + ValidAsZeroBits> {
    host: PinnedHostSlice<T>,
    device: CudaSlice<T>,
}

impl<T: DeviceRepr + ValidAsZeroBits> Staging<T> {
    /// Allocates `len` (at least 1) elements on both sides; the device side on `stream`.
    pub(super) fn new(
        dev: &Dev<'_>,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<Self, EngineError> {
        let len = len.max(1);
        // SAFETY: flags 0 is a plain page-locked allocation (not write-combined, so the
        // host may read it back quickly); the memory is only reached through the
        // returned PinnedHostSlice, which tracks its length and pending copies.
        #[allow(unsafe_code)]
        let host = unsafe { dev.gpu.ctx.alloc_pinned_with_flags::<T>(len, 0) }
            .map_err(dev.err("cuMemHostAlloc"))?;
        let device = stream
            .alloc_zeros::<T>(len)
            .map_err(dev.err("cuMemAlloc"))?;
        Ok(Self { host, device })
    }

    /// The host side for writing, once its previous copy finished.
    pub(super) fn host_mut(&mut self, dev: &Dev<'_>) -> Result<&mut [T], EngineError> {
        self.host
            .as_mut_slice()
            .map_err(dev.err("cuEventSynchronize"))
    }

    /// The host side for reading, once its previous copy finished.
    pub(super) fn host(&self, dev: &Dev<'_>) -> Result<&[T], EngineError> {
        self.host.as_slice().map_err(dev.err("cuEventSynchronize"))
    }

    /// Enqueues the copy of the whole host buffer to the device on `stream`.
    pub(super) fn upload(
        &mut self,
        dev: &Dev<'_>,
        stream: &Arc<CudaStream>,
    ) -> Result<(), EngineError> {
        stream
            .memcpy_htod(&self.host, &mut self.device)
            .map_err(dev.err("cuMemcpyHtoDAsync"))?;
        super::transfers::host_to_device(self.device.len() * std::mem::size_of::<T>());
        Ok(())
    }

    /// Enqueues the copy of the first `len` device elements to the host on `stream`.
    pub(super) fn download(
        &mut self,
        dev: &Dev<'_>,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<(), EngineError> {
        let len = len.min(self.device.len());
        let view = self.device.slice(0..len);
        stream
            .memcpy_dtoh(&view, &mut self.host)
            .map_err(dev.err("cuMemcpyDtoHAsync"))?;
        super::transfers::device_to_host(len * std::mem::size_of::<T>());
        Ok(())
    }

    /// What the pair holds on each side.
    pub(super) fn bytes(&self) -> LaneBytes {
        LaneBytes {
            pinned: self.host.num_bytes(),
            device: self.device.num_bytes(),
        }
    }

    /// The device buffer (a kernel argument).
    pub(super) fn device(&self) -> &CudaSlice<T> {
        &self.device
    }

    /// The device buffer for a kernel that writes it.
    pub(super) fn device_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.device
    }
}

/// One lane: a stream and the caller's per-lane buffers, with the chunk in flight.
struct Lane<L: LaneState> {
    stream: Arc<CudaStream>,
    state: Tracked<L>,
    pending: Option<Range<usize>>,
}

/// Runs `rows` rows through two lanes in chunks of the backend's chunk size.
///
/// `key(lane_rows)` names the lanes this call can reuse; `new_lane(stream, lane_rows)`
/// allocates a lane's buffers for up to `lane_rows` rows on `stream` (the pool's) when
/// the pool has none;
/// `issue(state, stream, rows)` fills the lane's pinned staging from the host and
/// enqueues uploads, kernels and downloads for one chunk; `collect(state, rows)` reads a
/// finished chunk's pinned results (called in chunk order).
pub(super) fn double_buffered<L: LaneState>(
    dev: &Dev<'_>,
    rows: usize,
    key: impl FnOnce(usize) -> LaneKey,
    mut new_lane: impl FnMut(&Arc<CudaStream>, usize) -> Result<L, EngineError>,
    mut issue: impl FnMut(&mut L, &Arc<CudaStream>, Range<usize>) -> Result<(), EngineError>,
    mut collect: impl FnMut(&mut L, Range<usize>) -> Result<(), EngineError>,
) -> Result<(), EngineError> {
    let chunk_rows = dev.gpu.batching.chunk_rows;
    let chunks = rows.div_ceil(chunk_rows);
    let lane_rows = chunk_rows.min(rows);
    let key = key(lane_rows);
    let pool = &dev.gpu.lanes;
    let mut lanes: Vec<Lane<L>> = Vec::with_capacity(2);
    for c in 0..chunks {
        let i = c % 2;
        if lanes.len() == i {
            // The second lane's stream is ordered after the caller's work so far.
            let stream = if i == 0 {
                Arc::clone(dev.stream)
            } else {
                pool.stream_after(dev.stream)
                    .map_err(dev.err("cuStreamCreate"))?
            };
            let state = match pool.take::<L>(&key) {
                Some((lane, ready)) => {
                    stream.wait(&ready).map_err(dev.err("cuStreamWaitEvent"))?;
                    lane
                }
                None => {
                    // Allocated (and its constant parts uploaded) on the pool's stream,
                    // which the lane's stream then waits for.
                    pool.note_created();
                    let home = pool
                        .home_stream(dev.stream)
                        .map_err(dev.err("cuStreamCreate"))?;
                    let lane = Tracked::new(new_lane(&home, lane_rows)?);
                    stream.join(&home).map_err(dev.err("cuStreamWaitEvent"))?;
                    lane
                }
            };
            lanes.push(Lane {
                stream,
                state,
                pending: None,
            });
        }
        let lane = &mut lanes[i];
        if let Some(done) = lane.pending.take() {
            collect(&mut lane.state.state, done)?;
        }
        let range = c * chunk_rows..rows.min((c + 1) * chunk_rows);
        issue(&mut lane.state.state, &lane.stream, range.clone())?;
        lane.pending = Some(range);
    }
    let mut tail: Vec<&mut Lane<L>> = lanes.iter_mut().filter(|l| l.pending.is_some()).collect();
    tail.sort_by_key(|l| l.pending.as_ref().map_or(0, |r| r.start));
    for lane in tail {
        if let Some(done) = lane.pending.take() {
            collect(&mut lane.state.state, done)?;
        }
    }
    if let Some(second) = lanes.get(1) {
        // Later work on the caller's stream (frees, other kernels) waits for lane two.
        dev.stream
            .join(&second.stream)
            .map_err(dev.err("cuStreamWaitEvent"))?;
    }
    // Both lanes' work is now ordered before this point of the caller's stream.
    let ready = Arc::new(
        dev.stream
            .record_event(None)
            .map_err(dev.err("cuEventRecord"))?,
    );
    for (i, lane) in lanes.into_iter().enumerate() {
        pool.park(key.clone(), lane.state, Arc::clone(&ready));
        if i == 1 {
            pool.park_stream(lane.stream);
        }
    }
    Ok(())
}

/// The validity bytes of `range` (bit 0 = the range's first row), or all-valid.
pub(super) fn chunk_validity(
    nulls: Option<&arrow::buffer::NullBuffer>,
    range: &Range<usize>,
    out: &mut [u8],
) {
    let bytes = range.len().div_ceil(8).min(out.len());
    match nulls {
        Some(n) => {
            let sliced = n.inner().slice(range.start, range.len()).sliced();
            let src = sliced.as_slice();
            let copy = bytes.min(src.len());
            out[..copy].copy_from_slice(&src[..copy]);
        }
        None => out[..bytes].fill(0xFF),
    }
}
