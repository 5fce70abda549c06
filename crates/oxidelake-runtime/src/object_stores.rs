//! The object stores every session, scheduler and executor gets.

use datafusion::execution::runtime_env::RuntimeEnv;

/// Installs OxideLake's object stores into `env`:
/// - with the `io-uring` feature on Linux, the io_uring store for `file://` when the
///   kernel allows io_uring (the reason is logged when it does not, and DataFusion's
///   `LocalFileSystem` stays);
/// - then, always, [`oxidelake_storage::ParquetFooterGuard`] around whichever `file://`
///   store that is, so no Parquet read of `env` — table registration, snapshot file lists,
///   `CREATE EXTERNAL TABLE`, scans on any cluster member — hands parquet's metadata
///   decoder a footer length larger than its file (it underflows and panics on one).
///
/// Installing it twice on one `RuntimeEnv` guards `file://` once.
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
    if let Err(e) = oxidelake_storage::guard_local_parquet_reads(env) {
        tracing::warn!(error = %e, "Parquet footer guard not installed on file://");
    }
}
