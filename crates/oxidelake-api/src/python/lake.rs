//! `oxidelake.LakeClient`: managed large objects from Python. An INSERT with
//! `oxidelake.File` parameters streams the files into the content-addressed store, and
//! the row (with its `DataLocation`s) becomes visible when the table commit lands.

use std::sync::Arc;
use std::time::Duration;

use oxidelake_sdk::{GcPolicy, GcReport, InsertValue, LakeClient as Client, SdkError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};

use super::error::to_py;
use super::frame::DataFrame;
use super::location::{DataLocation, File, type_name};
use super::object_file::ObjectFile;
use super::wait::wait;

/// A client of one local data directory (`<dir>/objects` for the managed objects,
/// `<dir>/tables` for the versioned tables), created if missing.
#[pyclass(frozen, module = "oxidelake")]
pub(super) struct LakeClient {
    inner: Arc<Client>,
}

/// What an INSERT did: the table version the row became visible in, and the locations
/// of its uploaded files in parameter order.
#[pyclass(frozen, get_all, module = "oxidelake")]
pub(super) struct InsertOutcome {
    version: i64,
    locations: Vec<Py<DataLocation>>,
}

#[pymethods]
impl InsertOutcome {
    fn __repr__(&self) -> String {
        let uris: Vec<&str> = self.locations.iter().map(|l| l.get().inner.uri()).collect();
        format!(
            "InsertOutcome(version={}, locations={uris:?})",
            self.version
        )
    }
}

#[pymethods]
impl LakeClient {
    #[new]
    fn new(py: Python<'_>, data_dir: std::path::PathBuf) -> PyResult<Self> {
        let client = py
            .detach(move || Client::open(&data_dir))
            .map_err(|e| to_py(py, &e))?;
        Ok(Self {
            inner: Arc::new(client),
        })
    }

    /// Creates table `name` (`ns.table`) with `columns` given as
    /// `"id:int64!, note:utf8, episode:file"` (int64, float64, utf8, bool, file; `!` is
    /// NOT NULL), as `oxide table create` takes them. Returns the table's version.
    fn create_table(&self, py: Python<'_>, name: String, columns: &str) -> PyResult<i64> {
        let schema = oxidelake_sdk::cli::parse_columns(columns).map_err(|e| to_py(py, &e))?;
        let client = Arc::clone(&self.inner);
        wait(py, async move { client.create_table(&name, schema).await })
    }

    /// Executes `INSERT INTO ns.table (c1, …) VALUES (?, …)` with `params`: int, float,
    /// str, bool, None, or `oxidelake.File(path)` for a FILE column. Every value is
    /// checked against its column before any file is read; the files are then
    /// uploaded and the row committed, with the GIL released throughout.
    #[pyo3(signature = (sql, params = None))]
    fn execute(
        &self,
        py: Python<'_>,
        sql: String,
        params: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<InsertOutcome> {
        let params = params
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, value)| insert_value(i, value))
            .collect::<PyResult<Vec<_>>>()?;
        let client = Arc::clone(&self.inner);
        let outcome = wait(py, async move { client.execute(&sql, params).await })?;
        Ok(InsertOutcome {
            version: outcome.version,
            locations: outcome
                .locations
                .into_iter()
                .map(|inner| Py::new(py, DataLocation { inner }))
                .collect::<PyResult<_>>()?,
        })
    }

    /// Runs SQL over the latest committed version of every table (named `ns.table`).
    /// FILE columns come back as structs of uri, mime, size and sha256.
    fn sql(&self, py: Python<'_>, query: String) -> PyResult<DataFrame> {
        let client = Arc::clone(&self.inner);
        let (schema, batches) = wait(py, async move {
            let mut stream = client.sql_stream(&query).await?;
            let schema = stream.schema();
            Ok::<_, SdkError>((schema, stream.collect().await?))
        })?;
        Ok(DataFrame::new(schema, batches))
    }

    /// Opens the object at `location` (a `DataLocation`, or a FILE column's dict) as a
    /// binary file. All of its bytes are hashed and checked first, so a tampered or
    /// truncated object raises `OxideLakeError` (kind `corrupt_object`) here.
    fn open(&self, py: Python<'_>, location: &Bound<'_, PyAny>) -> PyResult<ObjectFile> {
        let location = DataLocation::extract(location)?;
        let client = Arc::clone(&self.inner);
        let target = location.clone();
        let reader = py
            .detach(move || client.open_object(&target))
            .map_err(|e| to_py(py, &e))?;
        Ok(ObjectFile::new(location, reader))
    }

    /// Deletes objects that no committed table version references, no INSERT in
    /// flight holds, and that are older than `retention` (a `datetime.timedelta`, or
    /// hours as a number; at least one hour unless `allow_below_floor`). Returns what
    /// it did as a dict (scanned, referenced, pinned, too_young, deleted, freed_bytes,
    /// deleted_uploads, stale_pins).
    #[pyo3(signature = (retention, allow_below_floor = false))]
    fn gc<'py>(
        &self,
        py: Python<'py>,
        retention: &Bound<'py, PyAny>,
        allow_below_floor: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut policy = GcPolicy::new(retention_of(retention)?);
        if allow_below_floor {
            policy = policy.allow_below_floor();
        }
        let client = Arc::clone(&self.inner);
        let report = wait(py, async move { client.gc(policy).await })?;
        report_dict(py, &report)
    }

    /// The data directory.
    #[getter]
    fn data_dir(&self) -> std::path::PathBuf {
        self.inner.data_dir().to_path_buf()
    }

    fn __repr__(&self) -> String {
        format!("LakeClient({:?})", self.inner.data_dir().display())
    }
}

/// The engine's value of the `i`th parameter.
fn insert_value(i: usize, value: &Bound<'_, PyAny>) -> PyResult<InsertValue> {
    if value.is_none() {
        return Ok(InsertValue::Null);
    }
    if let Ok(file) = value.cast::<File>() {
        return Ok(InsertValue::File(file.get().upload()));
    }
    // bool before int: Python's True is also an int.
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(InsertValue::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        return value.extract::<i64>().map(InsertValue::Int64).map_err(|_| {
            pyo3::exceptions::PyOverflowError::new_err(format!(
                "parameter {} does not fit a BIGINT",
                i + 1
            ))
        });
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(InsertValue::Float64(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(InsertValue::Utf8(value.extract()?));
    }
    let hint = if value.hasattr("__fspath__").unwrap_or(false) {
        " (wrap a path to upload in oxidelake.File)"
    } else {
        ""
    };
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "parameter {} is a {}; expected int, float, str, bool, None or oxidelake.File{hint}",
        i + 1,
        type_name(value)
    )))
}

/// A retention given as a `timedelta` or as hours.
fn retention_of(value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let hours = if value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>() {
        value.extract::<f64>()?
    } else if value.hasattr("total_seconds")? {
        value.call_method0("total_seconds")?.extract::<f64>()? / 3600.0
    } else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "retention is a {}; expected a datetime.timedelta or a number of hours",
            type_name(value)
        )));
    };
    oxidelake_sdk::parse_retention_hours(&hours.to_string()).map_err(|e| to_py(value.py(), &e))
}

fn report_dict<'py>(py: Python<'py>, report: &GcReport) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in [
        ("scanned", report.scanned),
        ("referenced", report.referenced),
        ("pinned", report.pinned),
        ("too_young", report.too_young),
        ("deleted", report.deleted),
        ("freed_bytes", report.freed_bytes),
        ("deleted_uploads", report.deleted_uploads),
        ("stale_pins", report.stale_pins),
    ] {
        dict.set_item(key, value)?;
    }
    Ok(dict)
}
