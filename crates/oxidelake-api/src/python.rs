//! The `oxidelake` Python module (the `python` feature; built as a wheel by maturin from
//! `crates/oxidelake-api/pyproject.toml`, see docs/python.md).
//!
//! ```text
//! Session.local() / Session.connect(url) ──sql(...)──▶ DataFrame ──to_arrow()──▶ pyarrow.Table
//!        │ register_parquet, set, explain                 │   (Arrow C stream: no copy)
//!        ▼                                                └─ to_pandas(), to_polars()
//! OxideSession (the engine's, placement and all)
//!
//! LakeClient(dir) ──execute("INSERT …", [42, File("ep42.mcap")])──▶ InsertOutcome
//!        │ create_table, sql, gc                                      │ .locations
//!        └──open(DataLocation)──▶ ObjectFile (verified before the first byte)
//! ```
//!
//! Queries run on a process-wide tokio runtime with the GIL released; the calling thread
//! checks for Ctrl-C every 100 ms and cancels the query when it comes. Engine errors are
//! raised as `oxidelake.OxideLakeError`, whose `kind` attribute says which (`sql`,
//! `plan`, `io`, `resources_exhausted`, …).

mod error;
mod frame;
mod lake;
mod location;
mod object_file;
mod session;
mod wait;

use pyo3::prelude::*;

/// The module `oxidelake`.
#[pymodule]
fn oxidelake(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The engine's warnings (a device failure replayed on the CPU, a query re-run on
    // the CPU) and, under `RUST_LOG=info`, why no GPU was taken go to stderr, as from
    // `oxide`; without a subscriber they would be dropped unseen.
    oxidelake_runtime::cli::logging::init(oxidelake_runtime::cli::logging::filter(None, "warn"));
    // How the module was compiled, for speed reports: a dev build is several times
    // slower than a release build (`oxide --version` says the same of the binary).
    m.add(
        "build_profile",
        if cfg!(debug_assertions) {
            "dev"
        } else {
            "release"
        },
    )?;
    m.add_class::<session::Session>()?;
    m.add_class::<frame::DataFrame>()?;
    m.add_class::<lake::LakeClient>()?;
    m.add_class::<lake::InsertOutcome>()?;
    m.add_class::<location::DataLocation>()?;
    m.add_class::<location::File>()?;
    m.add_class::<object_file::ObjectFile>()?;
    m.add("OxideLakeError", m.py().get_type::<error::OxideLakeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
