//! # oxidelake-memory
//!
//! Where OxideLake's bytes live: aligned host allocations ([`AlignedBuf`]), page-locked
//! host memory for DMA when a CUDA driver is present ([`HostAllocator`], observable as
//! [`MemoryClass`]), and the three-tier [`SpillManager`] that keeps hot batches in device
//! or host memory and demotes cold ones to Arrow IPC files on disk.
//!
//! **Allowed internal dependencies:** `oxidelake-core` only (spec §3).
//!
//! ```text
//!            register / get                 high watermark: demote coldest
//!   caller ───────────────▶ SpillManager ──────────────────────────────────┐
//!                             │  device tier (VRAM, empty without a GPU)   │
//!                             │  host tier   (RecordBatch in RAM)          ▼
//!                             │  disk tier   (Arrow IPC via object_store) ◀┘
//!                             └─ promote on access (least recently used leaves first)
//! ```
//!
//! [`open_files`] raises the process's open-file limit for spill files.
//!
//! Unsafe code is confined to [`AlignedBuf`] (the global allocator), the open-file limit
//! calls and, with the `cuda` feature, to the driver probe and pinned allocation; each
//! block states its invariant.
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod aligned;
pub mod cuda_probe;
mod error;
mod host;
pub mod ipc;
pub mod open_files;
mod spill;

pub use aligned::AlignedBuf;
pub use error::MemoryError;
pub use host::{HostAllocator, HostMemory, MemoryClass};
pub use spill::{BatchId, DiskWrites, SpillConfig, SpillManager};
