//! Distances between a `FixedSizeList<Float32>` column and a query vector on CUDA: the
//! vectors (`rows * dim` floats) and their validity go up in one copy each, one warp per
//! row accumulates in f64 (`l2_distance`, `cosine_distance`), and the distances and
//! their validity come back.
//!
//! A vector column is not something a device batch holds (its values are not one image
//! a row), so the operator takes the host column; an element-level NULL inside a vector
//! refuses the batch with `Unsupported`, and the operator runs it on the CPU.

use arrow::array::{Array, FixedSizeListArray, Float32Array, Float64Array};
use arrow::buffer::NullBuffer;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{BLOCK, Dev, unsupported};
use crate::kernels::CudaKernel;
use crate::ops::{DistanceMetric, VectorDistanceArgs};

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
    let dim_i32 = i32::try_from(dim).map_err(|_| unsupported("vector dimension"))?;
    let shared_mem_bytes = u32::try_from(dim * 4).map_err(|_| unsupported("vector dimension"))?;
    let entry = match args.metric {
        DistanceMetric::L2 => "l2_distance",
        DistanceMetric::Cosine => "cosine_distance",
    };
    let f = dev.gpu.function(CudaKernel::VectorDistance, entry)?;
    let (vectors, query) = (dev.upload(flat)?, dev.upload(args.query)?);
    let valid = dev.validity(list.nulls(), rows)?;
    let (mut out, mut out_valid) = (dev.zeros::<f64>(rows)?, dev.zeros::<u8>(rows)?);
    let rows_u64 = rows as u64;
    let warps_per_block = (BLOCK / 32) as usize;
    let blocks = u32::try_from(rows.div_ceil(warps_per_block).min(65_535)).unwrap_or(65_535);
    let config = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes,
    };
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&vectors)
        .arg(&valid)
        .arg(&query)
        .arg(&dim_i32)
        .arg(&rows_u64)
        .arg(&mut out)
        .arg(&mut out_valid);
    // SAFETY: l2_distance/cosine_distance(const f32*, const u8*, const f32*, int, u64,
    // f64*, u8*): `vectors` holds rows * dim floats, `valid` a bitmap of ceil(rows/8)
    // bytes, the query dim floats, the outputs `rows` entries each; dynamic shared memory
    // is dim floats, where the kernel stages the query; the kernel bounds every access by
    // `rows` and `dim`.
    #[allow(unsafe_code)]
    unsafe { launch.launch(config) }.map_err(dev.err("launch vector distance"))?;
    let distances = dev.download(&out)?;
    let validity = dev.download(&out_valid)?;
    Ok(Float64Array::new(
        distances.into(),
        Some(NullBuffer::from_iter(validity.iter().map(|v| *v != 0))),
    ))
}
