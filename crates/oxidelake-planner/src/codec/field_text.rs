//! Schema fields on the wire as text: name, Arrow's text form of the data type, and
//! nullability. The partial aggregate's output schema and a join filter's intermediate
//! schema travel this way.

use arrow::datatypes::{DataType, Field};
use datafusion::error::{DataFusionError, Result};

/// A field: name, data type (Arrow's text form), nullability.
pub(super) type FieldText = (String, String, bool);

pub(super) fn field_text(field: &Field) -> FieldText {
    (
        field.name().clone(),
        field.data_type().to_string(),
        field.is_nullable(),
    )
}

/// The data type `text` names (Arrow's `Display` form, which `FromStr` parses back).
pub(super) fn data_type(text: &str) -> Result<DataType> {
    text.parse().map_err(|e| {
        DataFusionError::Internal(format!(
            "malformed OxideLake plan payload: data type {text:?}: {e}"
        ))
    })
}
