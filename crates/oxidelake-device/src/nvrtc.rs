//! The engine's one path from CUDA C source to PTX: NVRTC at runtime.
//!
//! Both `CudaBackend` (on first use of a kernel) and the CI kernel compile check call
//! [`compile`], so the check exercises exactly the options the engine uses.

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};
use oxidelake_core::{BackendKind, EngineError};

use crate::kernels::CudaKernel;

/// Virtual architectures the CI compile check targets (A100 and H100/H200).
pub const CHECKED_ARCHS: &[&str] = &["compute_80", "compute_90"];

/// The newest virtual architecture in our table that a device of compute capability
/// `(major, minor)` can run; the driver JIT-compiles the PTX for the exact device.
pub fn arch_for(major: i32, minor: i32) -> &'static str {
    const TABLE: &[((i32, i32), &str)] = &[
        ((12, 0), "compute_120"),
        ((10, 0), "compute_100"),
        ((9, 0), "compute_90"),
        ((8, 9), "compute_89"),
        ((8, 6), "compute_86"),
        ((8, 0), "compute_80"),
        ((7, 5), "compute_75"),
    ];
    TABLE
        .iter()
        .find(|(cc, _)| (major, minor) >= *cc)
        .map(|(_, arch)| *arch)
        .unwrap_or("compute_75")
}

/// Compiles `kernel` to PTX for `arch` (e.g. `compute_90`).
///
/// Returns [`EngineError::BackendUnavailable`] when libnvrtc cannot be loaded (cudarc
/// would panic on the first NVRTC call) and [`EngineError::KernelCompile`] with NVRTC's
/// log when the source does not compile.
pub fn compile(kernel: CudaKernel, arch: &'static str) -> Result<Ptx, EngineError> {
    compile_source(kernel.file_name(), kernel.source(), arch)
}

fn compile_source(name: &str, source: &str, arch: &'static str) -> Result<Ptx, EngineError> {
    if !crate::nvrtc_available() {
        return Err(EngineError::BackendUnavailable {
            requested: BackendKind::Cuda,
            reason: "libnvrtc could not be loaded (install the CUDA runtime compiler, e.g. \
                     the nvidia-cuda-nvrtc-cu12 wheel, and add it to LD_LIBRARY_PATH)"
                .into(),
        });
    }
    let options = CompileOptions {
        arch: Some(arch),
        name: Some(name.to_string()),
        ..CompileOptions::default()
    };
    compile_ptx_with_opts(source, options).map_err(|e| {
        let log = match &e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => other.to_string(),
        };
        EngineError::KernelCompile {
            kernel: name.to_string(),
            arch: arch.to_string(),
            log,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_capabilities_map_to_the_newest_arch_they_can_run() {
        assert_eq!(arch_for(9, 0), "compute_90");
        assert_eq!(arch_for(8, 7), "compute_86");
        assert_eq!(arch_for(8, 0), "compute_80");
        assert_eq!(arch_for(6, 1), "compute_75");
    }

    /// The CI kernel compile check: every embedded `.cu` source compiles with NVRTC for
    /// every checked architecture, through the same function the engine uses.
    /// Set `OXIDE_REQUIRE_NVRTC=1` to turn a missing libnvrtc into a failure (CI does).
    #[test]
    fn every_embedded_cuda_kernel_compiles_with_nvrtc_for_sm80_and_sm90() {
        if !crate::nvrtc_available() {
            let required = std::env::var("OXIDE_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "OXIDE_REQUIRE_NVRTC=1 but libnvrtc could not be loaded"
            );
            eprintln!("nvrtc: SKIPPED kernel compile check: libnvrtc not found on the loader path");
            return;
        }
        let mut compiled = 0;
        for kernel in CudaKernel::ALL {
            for arch in CHECKED_ARCHS {
                let ptx = compile(*kernel, arch)
                    .unwrap_or_else(|e| panic!("{} for {arch}: {e}", kernel.file_name()));
                let text = ptx.to_src();
                for entry in kernel.entry_points() {
                    assert!(
                        text.contains(&format!(".entry {entry}")),
                        "PTX of {} for {arch} lacks .entry {entry}",
                        kernel.file_name()
                    );
                }
                eprintln!(
                    "nvrtc: compiled {} for {arch} ({} bytes of PTX, entries: {})",
                    kernel.file_name(),
                    text.len(),
                    kernel.entry_points().join(", ")
                );
                compiled += 1;
            }
        }
        eprintln!("nvrtc: {compiled} kernel/arch combinations compiled");
        assert_eq!(compiled, CudaKernel::ALL.len() * CHECKED_ARCHS.len());
    }

    #[test]
    fn a_kernel_with_a_syntax_error_reports_nvrtcs_log() {
        if !crate::nvrtc_available() {
            eprintln!("nvrtc: SKIPPED: libnvrtc not found");
            return;
        }
        let src = "extern \"C\" __global__ void broken(int* p) { p[0] = ; }";
        match compile_source("broken.cu", src, "compute_80") {
            Err(EngineError::KernelCompile { kernel, arch, log }) => {
                assert_eq!(
                    (kernel.as_str(), arch.as_str()),
                    ("broken.cu", "compute_80")
                );
                assert!(log.contains("error"), "{log}");
            }
            other => panic!("expected KernelCompile, got {other:?}"),
        }
    }
}
