//! `oxidelake.DataLocation` and `oxidelake.File`: the two values that cross between
//! Python and the managed object store.

use std::path::PathBuf;

use oxidelake_sdk::{DataLocation as Location, FileUpload, ObjectError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::error::to_py;

/// Where a managed object lives and what it must be: `uri`, `mime`, `size` (bytes) and
/// `sha256` (hex). `LakeClient.open` accepts one of these, or the dict a FILE column
/// holds in `to_arrow().to_pylist()`.
#[pyclass(frozen, eq, module = "oxidelake", name = "DataLocation")]
#[derive(PartialEq)]
pub(super) struct DataLocation {
    pub(super) inner: Location,
}

#[pymethods]
impl DataLocation {
    #[new]
    fn new(py: Python<'_>, uri: String, mime: String, size: u64, sha256: &str) -> PyResult<Self> {
        let digest = sha256.parse().map_err(|e: ObjectError| to_py(py, &e))?;
        Ok(Self {
            inner: Location::new(uri, mime, size, digest),
        })
    }

    /// The object's URI (relative to the data directory for the local store).
    #[getter]
    fn uri(&self) -> &str {
        self.inner.uri()
    }

    /// The MIME type recorded at upload.
    #[getter]
    fn mime(&self) -> &str {
        self.inner.mime()
    }

    /// The size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.inner.size()
    }

    /// The SHA-256 digest, as 64 hex characters.
    #[getter]
    fn sha256(&self) -> String {
        self.inner.sha256().to_string()
    }

    /// The location as the dict a FILE column holds.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("uri", self.uri())?;
        dict.set_item("mime", self.mime())?;
        dict.set_item("size", self.size())?;
        dict.set_item("sha256", self.sha256())?;
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        format!(
            "DataLocation(uri={:?}, mime={:?}, size={}, sha256={:?})",
            self.uri(),
            self.mime(),
            self.size(),
            self.sha256()
        )
    }
}

impl DataLocation {
    /// A `DataLocation`, or a mapping with its four keys (a FILE column's value).
    pub(super) fn extract(value: &Bound<'_, PyAny>) -> PyResult<Location> {
        if let Ok(location) = value.cast::<DataLocation>() {
            return Ok(location.get().inner.clone());
        }
        let py = value.py();
        let field = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            value.get_item(key).map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "expected an oxidelake.DataLocation or a dict with uri, mime, size and \
                     sha256; got {} without {key:?}",
                    type_name(value)
                ))
            })
        };
        let located = Self::new(
            py,
            field("uri")?.extract()?,
            field("mime")?.extract()?,
            field("size")?.extract()?,
            &field("sha256")?.extract::<String>()?,
        )?;
        Ok(located.inner)
    }
}

/// A local file to upload as an INSERT parameter: `File("ep42.mcap")`, optionally with
/// its MIME type (otherwise it is sniffed from the name and first bytes).
#[pyclass(frozen, module = "oxidelake", name = "File")]
pub(super) struct File {
    path: PathBuf,
    mime: Option<String>,
}

#[pymethods]
impl File {
    #[new]
    #[pyo3(signature = (path, mime = None))]
    fn new(path: PathBuf, mime: Option<String>) -> Self {
        Self { path, mime }
    }

    /// The path to upload.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The MIME type given, if any.
    #[getter]
    fn mime(&self) -> Option<&str> {
        self.mime.as_deref()
    }

    fn __repr__(&self) -> String {
        match &self.mime {
            Some(mime) => format!("File({:?}, mime={mime:?})", self.path.display()),
            None => format!("File({:?})", self.path.display()),
        }
    }
}

impl File {
    pub(super) fn upload(&self) -> FileUpload {
        let upload = FileUpload::from_path(&self.path);
        match &self.mime {
            Some(mime) => upload.with_mime(mime.clone()),
            None => upload,
        }
    }
}

/// The Python type name of `value`, for messages.
pub(super) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}
