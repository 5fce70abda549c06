//! `oxidelake.ObjectFile`: a managed object opened for reading, as a read-only binary
//! file object (`read`, `with`, `shutil.copyfileobj`).

use std::io::Read;
use std::sync::Mutex;

use oxidelake_sdk::{DataLocation as Location, VerifiedReader, verification_error};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::error::to_py;
use super::location::DataLocation;

/// How much `read()` without a size reads per step (the GIL is released meanwhile).
const CHUNK: usize = 1 << 20;

/// A managed object opened by `LakeClient.open`. Every byte was hashed and checked
/// against the location before the object was opened; reading re-hashes and raises
/// `OxideLakeError` (kind `corrupt_object`) at the end if the file changed since.
#[pyclass(frozen, module = "oxidelake")]
pub(super) struct ObjectFile {
    location: Location,
    // `None` once closed.
    reader: Mutex<Option<VerifiedReader>>,
}

impl ObjectFile {
    pub(super) fn new(location: Location, reader: VerifiedReader) -> Self {
        Self {
            location,
            reader: Mutex::new(Some(reader)),
        }
    }
}

#[pymethods]
impl ObjectFile {
    /// Up to `size` bytes (all that remain when `size` is negative or omitted); `b""`
    /// at the end.
    #[pyo3(signature = (size = -1))]
    fn read<'py>(&self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let reader = &self.reader;
        // A huge `size` allocates no more than the object (plus one byte, so a file that
        // grew since its upload still reaches the size check).
        let most = usize::try_from(self.location.size())
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let read = py.detach(move || -> Result<Option<Vec<u8>>, std::io::Error> {
            let mut guard = reader.lock().unwrap_or_else(|p| p.into_inner());
            let Some(reader) = guard.as_mut() else {
                return Ok(None);
            };
            let mut out = Vec::new();
            match usize::try_from(size) {
                Ok(size) => {
                    let size = size.min(most);
                    out.resize(size, 0);
                    let mut filled = 0;
                    // Fill up to `size`, as a buffered Python file does. The reader's
                    // end-of-file check runs on the read that returns 0, so a short
                    // read has been checked and an exact one is checked by the next.
                    while filled < size {
                        let n = reader.read(&mut out[filled..])?;
                        if n == 0 {
                            break;
                        }
                        filled += n;
                    }
                    out.truncate(filled);
                }
                Err(_) => {
                    let mut chunk = vec![0u8; CHUNK];
                    loop {
                        let n = reader.read(&mut chunk)?;
                        if n == 0 {
                            break;
                        }
                        out.extend_from_slice(&chunk[..n]);
                    }
                }
            }
            Ok(Some(out))
        });
        match read {
            Ok(Some(bytes)) => Ok(PyBytes::new(py, &bytes)),
            Ok(None) => Err(pyo3::exceptions::PyValueError::new_err(
                "I/O operation on closed file",
            )),
            Err(e) => Err(to_py(py, &verification_error(e))),
        }
    }

    /// Everything that remains.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, -1)
    }

    fn readable(&self) -> bool {
        true
    }

    fn writable(&self) -> bool {
        false
    }

    fn seekable(&self) -> bool {
        false
    }

    /// Closes the file; reading after this raises `ValueError`.
    fn close(&self) {
        self.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Whether the file is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.reader
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// The location this file reads.
    #[getter]
    fn location(&self) -> DataLocation {
        DataLocation {
            inner: self.location.clone(),
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "ObjectFile({:?}, size={}, closed={})",
            self.location.uri(),
            self.location.size(),
            self.closed()
        )
    }
}
