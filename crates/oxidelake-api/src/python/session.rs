//! `oxidelake.Session`: an engine session, embedded or on a cluster.

use std::sync::Arc;

use oxidelake_runtime::{EngineError, OxideSession, check_forced_backend, option_keys};
use pyo3::prelude::*;

use super::error::to_py;
use super::frame::DataFrame;
use super::wait::wait;

/// An OxideLake session: `Session.local()` runs queries in this process,
/// `Session.connect("df://host:port")` on a Ballista cluster.
#[pyclass(frozen, module = "oxidelake")]
pub(super) struct Session {
    inner: Arc<OxideSession>,
}

#[pymethods]
impl Session {
    /// An embedded session placing operators for `placement`: auto (this machine's
    /// hardware), cpu or cuda (a GPU the machine lacks runs the GPU operators'
    /// CPU paths). A backend forced by `OXIDE_BACKEND` that this machine cannot start
    /// raises here, as `oxide sql` refuses to start.
    #[staticmethod]
    #[pyo3(signature = (placement = "auto"))]
    fn local(py: Python<'_>, placement: &str) -> PyResult<Self> {
        check_forced_backend().map_err(|e| to_py(py, &e))?;
        let session = Self {
            inner: Arc::new(OxideSession::local()),
        };
        if placement != "auto" {
            session.set(py, option_keys::PLACEMENT_TARGET, placement)?;
        }
        Ok(session)
    }

    /// A session on the cluster whose scheduler listens at `url` (`df://host:port`).
    #[staticmethod]
    fn connect(py: Python<'_>, url: String) -> PyResult<Self> {
        let session = wait(py, async move { OxideSession::connect(&url).await })?;
        Ok(Self {
            inner: Arc::new(session),
        })
    }

    /// Registers the Parquet file or directory at `path` as table `name`.
    fn register_parquet(&self, py: Python<'_>, name: String, path: String) -> PyResult<()> {
        let session = Arc::clone(&self.inner);
        wait(
            py,
            async move { session.register_parquet(&name, &path).await },
        )
    }

    /// Runs one SQL statement and returns its result. The statement runs now, with the
    /// GIL released; Ctrl-C cancels it.
    fn sql(&self, py: Python<'_>, query: String) -> PyResult<DataFrame> {
        let session = Arc::clone(&self.inner);
        let (schema, batches) = wait(py, async move {
            let mut stream = session.sql_stream(&query).await?;
            let schema = stream.schema();
            Ok::<_, EngineError>((schema, stream.collect().await?))
        })?;
        Ok(DataFrame::new(schema, batches))
    }

    /// The physical plan of `query` with where each operator runs (`GpuFilterExec[cuda]`)
    /// and why nodes stayed on the CPU (`[cpu: median()]`).
    fn explain(&self, py: Python<'_>, query: String) -> PyResult<String> {
        let session = Arc::clone(&self.inner);
        wait(py, async move { session.explain(&query).await })
    }

    /// Sets a session option, as `SET key = 'value'` does
    /// (`set("oxidelake.placement.target", "cuda")`).
    fn set(&self, py: Python<'_>, key: &str, value: &str) -> PyResult<()> {
        let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
        if key.is_empty() || !key.chars().all(is_name) {
            let error = EngineError::InvalidArgument {
                what: "option name",
                detail: format!(
                    "{key:?} is not an option name such as {}",
                    option_keys::PLACEMENT_TARGET
                ),
            };
            return Err(super::error::to_py(py, &error));
        }
        let statement = format!("SET {key} = '{}'", value.replace('\'', "''"));
        let session = Arc::clone(&self.inner);
        wait(py, async move { session.sql(&statement).await.map(drop) })
    }

    fn __repr__(&self) -> String {
        format!("Session({:?})", self.inner.mode())
    }
}
