//! The `oxidelake` Python module (the `python` feature; built as a wheel by maturin from
//! `crates/oxidelake-api/pyproject.toml`, see docs/python.md).
//!
//! ```text
//! Session.local() / Session.connect(url) ──sql(...)──▶ DataFrame ──to_arrow()──▶ pyarrow.Table
//!        │ register_parquet, set, explain                 │   (Arrow C stream: no copy)
//!        ▼                                                └─ to_pandas(), to_polars()
//! OxideSession (the engine's, placement and all)
//! ```
//!
//! Queries run on a process-wide tokio runtime with the GIL released; the calling thread
//! checks for Ctrl-C every 100 ms and cancels the query when it comes. Engine errors are
//! raised as `oxidelake.OxideLakeError`, whose `kind` attribute says which (`sql`,
//! `plan`, `io`, `resources_exhausted`, …).

mod error;
mod frame;
mod session;
mod wait;

use pyo3::prelude::*;

/// The module `oxidelake`.
#[pymodule]
fn oxidelake(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<session::Session>()?;
    m.add_class::<frame::DataFrame>()?;
    m.add("OxideLakeError", m.py().get_type::<error::OxideLakeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
