//! Schema checks on both sides of Delta Lake: at `create_table` the schema must survive
//! the Arrow → Delta → Arrow conversion unchanged, and at `append` a batch must fit the
//! table's schema before any byte is written.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::{CatalogError, TableName};

/// How nullability is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nullability {
    /// Both sides must agree.
    Equal,
    /// A non-nullable `found` field fits a nullable `expected` one, not the other way.
    FoundMayBeStricter,
}

/// Fails with [`CatalogError::UnsupportedColumnType`] naming the first column of
/// `requested` that Delta stored as something else (`stored` is the schema read back).
pub(crate) fn check_round_trip(
    name: &TableName,
    requested: &Schema,
    stored: &Schema,
) -> Result<(), CatalogError> {
    for (i, field) in requested.fields().iter().enumerate() {
        let same = stored
            .fields()
            .get(i)
            .is_some_and(|back| field_fits(back, field, Nullability::Equal));
        if !same {
            return Err(CatalogError::UnsupportedColumnType {
                table: name.to_string(),
                column: field.name().clone(),
                data_type: field.data_type().clone(),
            });
        }
    }
    Ok(())
}

/// Checks `batch` against the table schema `expected` and returns it re-labelled with that
/// schema (names and types equal ignoring field metadata; a batch column may be
/// non-nullable where the table's is nullable, never the reverse).
pub(crate) fn conform_batch(
    name: &TableName,
    batch: RecordBatch,
    expected: &SchemaRef,
) -> Result<RecordBatch, CatalogError> {
    let found = batch.schema();
    let fits = found.fields().len() == expected.fields().len()
        && found
            .fields()
            .iter()
            .zip(expected.fields().iter())
            .all(|(f, e)| field_fits(f, e, Nullability::FoundMayBeStricter));
    if !fits {
        return Err(CatalogError::SchemaMismatch {
            table: name.to_string(),
            expected: Arc::clone(expected),
            found,
        });
    }
    let columns = batch
        .columns()
        .iter()
        .zip(expected.fields().iter())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(Arc::clone(column))
            } else {
                // Only nested nullability or field metadata differ here.
                cast(column, field.data_type())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(Arc::clone(expected), columns)?)
}

fn field_fits(found: &Field, expected: &Field, nullability: Nullability) -> bool {
    let nullable_ok = match nullability {
        Nullability::Equal => found.is_nullable() == expected.is_nullable(),
        Nullability::FoundMayBeStricter => expected.is_nullable() || !found.is_nullable(),
    };
    found.name() == expected.name()
        && nullable_ok
        && type_fits(found.data_type(), expected.data_type(), nullability)
}

fn type_fits(found: &DataType, expected: &DataType, nullability: Nullability) -> bool {
    use DataType::{FixedSizeList, LargeList, List, Map, Struct};
    match (found, expected) {
        (Struct(f), Struct(e)) => {
            f.len() == e.len()
                && f.iter()
                    .zip(e.iter())
                    .all(|(f, e)| field_fits(f, e, nullability))
        }
        (List(f), List(e)) | (LargeList(f), LargeList(e)) => field_fits(f, e, nullability),
        (FixedSizeList(f, fn_), FixedSizeList(e, en)) => fn_ == en && field_fits(f, e, nullability),
        (Map(f, fs), Map(e, es)) => fs == es && field_fits(f, e, nullability),
        _ => found == expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray, StructArray};
    use arrow::datatypes::Fields;

    fn name() -> TableName {
        "robots.episodes".parse().unwrap()
    }

    fn file_fields(nullable: bool) -> Fields {
        Fields::from(vec![
            Field::new("uri", DataType::Utf8, nullable),
            Field::new("size", DataType::Int64, nullable),
        ])
    }

    fn batch(child_nullable: bool) -> RecordBatch {
        let file = StructArray::try_new(
            file_fields(child_nullable),
            vec![
                Arc::new(StringArray::from(vec!["file:///a"])),
                Arc::new(Int64Array::from(vec![3])),
            ],
            None,
        )
        .unwrap();
        let schema = Schema::new(vec![Field::new(
            "file",
            DataType::Struct(file_fields(child_nullable)),
            true,
        )]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(file)]).unwrap()
    }

    #[test]
    fn a_stricter_nested_batch_is_relabelled_with_the_table_schema() {
        let table = batch(true).schema();
        let conformed = conform_batch(&name(), batch(false), &table).unwrap();
        assert_eq!(conformed.schema(), table);
        assert_eq!(conformed.num_rows(), 1);
    }

    #[test]
    fn a_nullable_batch_column_does_not_fit_a_non_nullable_table_column() {
        let table = batch(false).schema();
        let err = conform_batch(&name(), batch(true), &table).unwrap_err();
        assert!(matches!(err, CatalogError::SchemaMismatch { .. }), "{err}");
    }

    #[test]
    fn a_type_changed_by_delta_is_named_in_the_error() {
        let requested = Schema::new(vec![Field::new("n", DataType::UInt64, false)]);
        let stored = Schema::new(vec![Field::new("n", DataType::Int64, false)]);
        let err = check_round_trip(&name(), &requested, &stored).unwrap_err();
        assert!(
            matches!(&err, CatalogError::UnsupportedColumnType { column, .. } if column == "n"),
            "{err}"
        );
    }
}
