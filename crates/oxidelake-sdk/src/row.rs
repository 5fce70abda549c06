//! Checking an INSERT against the table schema (before any file is opened) and building
//! its one-row batch (after the uploads).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, new_null_array};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use oxidelake_objects::{DataLocation, is_data_location, to_array};

use crate::insert::InsertStatement;
use crate::{InsertValue, SdkError};

/// For each table column, which parameter fills it (`None`: NULL).
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    pub(crate) param_of_column: Vec<Option<usize>>,
}

fn accepts(data_type: &DataType, value: &InsertValue) -> bool {
    match value {
        InsertValue::Int64(_) => data_type == &DataType::Int64,
        InsertValue::Float64(_) => data_type == &DataType::Float64,
        InsertValue::Utf8(_) => data_type == &DataType::Utf8,
        InsertValue::Bool(_) => data_type == &DataType::Boolean,
        InsertValue::Null => true,
        InsertValue::File(_) => is_data_location(data_type),
    }
}

/// Checks columns, arity, types and nullability; touches no file.
pub(crate) fn bind(
    statement: &InsertStatement,
    schema: &SchemaRef,
    params: &[InsertValue],
) -> Result<Binding, SdkError> {
    if params.len() != statement.columns.len() {
        return Err(SdkError::PlaceholderCount {
            columns: statement.columns.len(),
            placeholders: params.len(),
        });
    }
    let mut param_of_column = vec![None; schema.fields().len()];
    for (i, column) in statement.columns.iter().enumerate() {
        let index = schema
            .index_of(column)
            .map_err(|_| SdkError::UnknownColumn {
                table: statement.table.clone(),
                column: column.clone(),
            })?;
        let field = schema.field(index);
        if !accepts(field.data_type(), &params[i]) {
            return Err(SdkError::TypeMismatch {
                column: column.clone(),
                expected: if is_data_location(field.data_type()) {
                    "FILE (DataLocation)".to_string()
                } else {
                    field.data_type().to_string()
                },
                got: params[i].kind(),
            });
        }
        if params[i] == InsertValue::Null && !field.is_nullable() {
            return Err(SdkError::MissingValue(column.clone()));
        }
        param_of_column[index] = Some(i);
    }
    for (index, field) in schema.fields().iter().enumerate() {
        if param_of_column[index].is_none() && !field.is_nullable() {
            return Err(SdkError::MissingValue(field.name().clone()));
        }
    }
    Ok(Binding { param_of_column })
}

/// The one-row batch, with uploaded locations for the FILE parameters.
pub(crate) fn build_row(
    schema: &SchemaRef,
    binding: &Binding,
    params: &[InsertValue],
    uploaded: &HashMap<usize, DataLocation>,
) -> Result<RecordBatch, SdkError> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (index, field) in schema.fields().iter().enumerate() {
        let array: ArrayRef = match binding.param_of_column[index].map(|p| (p, &params[p])) {
            None | Some((_, InsertValue::Null)) => new_null_array(field.data_type(), 1),
            Some((_, InsertValue::Int64(v))) => Arc::new(Int64Array::from(vec![*v])),
            Some((_, InsertValue::Float64(v))) => Arc::new(Float64Array::from(vec![*v])),
            Some((_, InsertValue::Utf8(v))) => Arc::new(StringArray::from(vec![v.as_str()])),
            Some((_, InsertValue::Bool(v))) => Arc::new(BooleanArray::from(vec![*v])),
            Some((p, InsertValue::File(_))) => {
                let location = uploaded.get(&p).cloned().ok_or_else(|| {
                    SdkError::Engine(oxidelake_core::EngineError::Internal(format!(
                        "parameter {p} was not uploaded"
                    )))
                })?;
                Arc::new(to_array(&[Some(location)])?)
            }
        };
        columns.push(array);
    }
    RecordBatch::try_new(Arc::clone(schema), columns)
        .map_err(|e| SdkError::Engine(oxidelake_core::EngineError::from(e)))
}
