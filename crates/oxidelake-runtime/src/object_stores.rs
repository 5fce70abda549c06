//! The object stores every session, scheduler and executor gets.

use datafusion::execution::runtime_env::RuntimeEnv;

/// Installs OxideLake's object stores into `env`. With the `io-uring` feature on Linux
/// that is the io_uring store for `file://` when the kernel allows io_uring (the reason
/// is logged when it does not, and DataFusion's `LocalFileSystem` stays); otherwise
/// nothing changes.
pub fn install_object_stores(env: &RuntimeEnv) {
    #[cfg(all(target_os = "linux", feature = "io-uring"))]
    match oxidelake_storage::probe_io_uring() {
        Ok(()) => match oxidelake_storage::register_uring_file_store(env) {
            Ok(_) => tracing::debug!("file:// served by the io_uring object store"),
            Err(e) => {
                tracing::warn!(error = %e, "io_uring store not installed; using LocalFileSystem")
            }
        },
        Err(reason) => {
            tracing::warn!(%reason, "io_uring unavailable; using LocalFileSystem");
        }
    }
    #[cfg(not(all(target_os = "linux", feature = "io-uring")))]
    let _ = env;
}
