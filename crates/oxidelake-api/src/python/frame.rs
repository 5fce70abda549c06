//! `oxidelake.DataFrame`: a statement's result, handed to pyarrow without copying.

use std::sync::Arc;

use arrow::array::RecordBatchIterator;
use arrow::datatypes::SchemaRef;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// The result of `Session.sql`: its Arrow batches, held in this process. `to_arrow()`
/// (or `pyarrow.table(df)`, through the Arrow PyCapsule interface) shares their buffers
/// with pyarrow instead of copying them.
#[pyclass(frozen, module = "oxidelake")]
pub(super) struct DataFrame {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl DataFrame {
    pub(super) fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        Self { schema, batches }
    }
}

#[pymethods]
impl DataFrame {
    /// The Arrow C stream of the result (the Arrow PyCapsule interface): what
    /// `pyarrow.table(df)` and `pyarrow.RecordBatchReader.from_stream(df)` read.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The schema is the result's own; a requested one is a hint that may be ignored.
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            Arc::clone(&self.schema),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The result as a `pyarrow.Table`, sharing its buffers.
    fn to_arrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let pyarrow = slf.py().import("pyarrow")?;
        pyarrow.call_method1("table", (slf,))
    }

    /// The result as a `pandas.DataFrame` (through pyarrow).
    fn to_pandas<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::to_arrow(slf)?.call_method0("to_pandas")
    }

    /// The result as a `polars.DataFrame` (polars must be installed).
    fn to_polars<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let polars = slf.py().import("polars")?;
        polars.call_method1("from_arrow", (Self::to_arrow(slf)?,))
    }

    /// Rows in the result.
    fn __len__(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The column names.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// The addresses of the first column's value buffers, one per batch (how the tests
    /// check that pyarrow reads the engine's memory rather than a copy).
    fn _first_column_buffer_addresses(&self) -> Vec<usize> {
        self.batches
            .iter()
            .filter(|b| b.num_columns() > 0 && b.num_rows() > 0)
            .filter_map(|b| {
                let data = b.column(0).to_data();
                data.buffers()
                    .first()
                    .map(|buffer| buffer.as_ptr() as usize)
            })
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "DataFrame({} rows, columns {:?})",
            self.__len__(),
            self.columns()
        )
    }
}
