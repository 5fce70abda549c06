//! Text forms used by the `oxide insert`, `oxide table` and `oxide objects` commands:
//! column specs and parameters typed by their target column.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use oxidelake_objects::{data_location_field, is_data_location};

use crate::{FileUpload, InsertValue, SdkError, parse_insert};

fn invalid(detail: String) -> SdkError {
    SdkError::Engine(oxidelake_core::EngineError::InvalidArgument {
        what: "command line",
        detail,
    })
}

/// Parses `name:type[!]` specs separated by commas (`!` = NOT NULL); types: `int64`,
/// `float64`, `utf8`, `bool`, `file`.
pub fn parse_columns(spec: &str) -> Result<SchemaRef, SdkError> {
    let mut fields = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, ty) = part
            .split_once(':')
            .ok_or_else(|| invalid(format!("column {part:?} is not name:type")))?;
        let (ty, nullable) = match ty.strip_suffix('!') {
            Some(t) => (t, false),
            None => (ty, true),
        };
        let field = match ty.to_ascii_lowercase().as_str() {
            "int64" | "bigint" => Field::new(name, DataType::Int64, nullable),
            "float64" | "double" => Field::new(name, DataType::Float64, nullable),
            "utf8" | "string" | "varchar" => Field::new(name, DataType::Utf8, nullable),
            "bool" | "boolean" => Field::new(name, DataType::Boolean, nullable),
            "file" => data_location_field(name).with_nullable(nullable),
            other => {
                return Err(invalid(format!(
                    "type {other:?} of {name} is not one of int64, float64, utf8, bool, file"
                )));
            }
        };
        fields.push(field);
    }
    if fields.is_empty() {
        return Err(invalid("no columns given".into()));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Types the command-line `values` of an INSERT by the columns they go into: `NULL`
/// is NULL, `@path` a file upload for a FILE column (everything after the `@` is the
/// path, byte for byte, also bytes that are not UTF-8: `@take#2.bin` is the file
/// `take#2.bin`; MIME types are given separately, see [`apply_mime_overrides`]),
/// anything else parsed as the column's type, which needs it to be UTF-8 text.
pub fn typed_params<V: AsRef<OsStr>>(
    sql: &str,
    schema: &SchemaRef,
    values: &[V],
) -> Result<Vec<InsertValue>, SdkError> {
    let statement = parse_insert(sql)?;
    if values.len() != statement.columns.len() {
        return Err(SdkError::PlaceholderCount {
            columns: statement.columns.len(),
            placeholders: values.len(),
        });
    }
    statement
        .columns
        .iter()
        .zip(values)
        .map(|(column, value)| {
            let value = value.as_ref();
            let field = schema
                .field_with_name(column)
                .map_err(|_| SdkError::UnknownColumn {
                    table: statement.table.clone(),
                    column: column.clone(),
                })?;
            if value == "NULL" {
                return Ok(InsertValue::Null);
            }
            let bad = |what: &str| invalid(format!("{column}: {value:?} is not {what}"));
            if is_data_location(field.data_type()) {
                let path = file_path(value).ok_or_else(|| bad("a file (write @path)"))?;
                if path.as_os_str().is_empty() {
                    return Err(bad("a file (the path after @ is empty)"));
                }
                return Ok(InsertValue::File(FileUpload::from_path(path)));
            }
            let text = value.to_str().ok_or_else(|| bad("UTF-8 text"))?;
            Ok(match field.data_type() {
                DataType::Int64 => InsertValue::Int64(text.parse().map_err(|_| bad("an integer"))?),
                DataType::Float64 => {
                    InsertValue::Float64(text.parse().map_err(|_| bad("a number"))?)
                }
                DataType::Boolean => {
                    InsertValue::Bool(text.parse().map_err(|_| bad("true or false"))?)
                }
                DataType::Utf8 => InsertValue::Utf8(text.to_string()),
                other => return Err(invalid(format!("{column} has unsupported type {other}"))),
            })
        })
        .collect()
}

/// The path of an `@path` value: every byte after the `@`.
#[cfg(unix)]
fn file_path(value: &OsStr) -> Option<&Path> {
    use std::os::unix::ffi::OsStrExt;
    let path = value.as_bytes().strip_prefix(b"@")?;
    Some(Path::new(OsStr::from_bytes(path)))
}

/// The path of an `@path` value: everything after the `@` (which must be text on this
/// platform).
#[cfg(not(unix))]
fn file_path(value: &OsStr) -> Option<&Path> {
    value.to_str()?.strip_prefix('@').map(Path::new)
}

/// Applies `column=mime/type` overrides (the `--mime` option of `oxide insert`) to the
/// file parameters of `sql`. A column that is not a FILE parameter of the statement, or
/// a text without `=`, is an error.
pub fn apply_mime_overrides(
    sql: &str,
    params: &mut [InsertValue],
    overrides: &[String],
) -> Result<(), SdkError> {
    let statement = parse_insert(sql)?;
    for text in overrides {
        let (column, mime) = text
            .split_once('=')
            .ok_or_else(|| invalid(format!("--mime {text:?} is not column=type/subtype")))?;
        if mime.is_empty() || !mime.contains('/') {
            return Err(invalid(format!(
                "--mime {text:?}: {mime:?} is not a MIME type"
            )));
        }
        let index = statement
            .columns
            .iter()
            .position(|c| c == column)
            .ok_or_else(|| {
                invalid(format!(
                    "--mime {text:?}: the statement has no column {column}"
                ))
            })?;
        match params.get_mut(index) {
            Some(InsertValue::File(upload)) => {
                *upload = upload.clone().with_mime(mime);
            }
            _ => {
                return Err(invalid(format!(
                    "--mime {text:?}: the value of {column} is not a file (@path)"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_take_the_type_of_their_column() {
        let schema =
            parse_columns("id:int64!, score:float64, note:utf8, ok:bool, episode:file").unwrap();
        assert!(!schema.field(0).is_nullable());
        let params = typed_params(
            "INSERT INTO r.e (id, score, note, ok, episode) VALUES (?, ?, ?, ?, ?)",
            &schema,
            &["42", "0.5", "42", "true", "@a.mcap"],
        )
        .unwrap();
        assert_eq!(params[0], InsertValue::Int64(42));
        assert_eq!(params[2], InsertValue::Utf8("42".into()));
        assert_eq!(
            params[4],
            InsertValue::File(FileUpload::from_path("a.mcap"))
        );
        assert!(typed_params("INSERT INTO r.e (id) VALUES (?)", &schema, &["x"]).is_err());
        assert!(
            typed_params("INSERT INTO r.e (episode) VALUES (?)", &schema, &["a.mcap"]).is_err()
        );
    }

    #[test]
    fn a_hash_in_an_at_path_is_part_of_the_file_name_and_mime_comes_from_its_own_option() {
        let schema = parse_columns("id:int64!, episode:file").unwrap();
        let sql = "INSERT INTO r.e (id, episode) VALUES (?, ?)";
        let mut params = typed_params(sql, &schema, &["1", "@take#2.bin"]).unwrap();
        assert_eq!(
            params[1],
            InsertValue::File(FileUpload::from_path("take#2.bin"))
        );
        apply_mime_overrides(sql, &mut params, &["episode=video/mp4".into()]).unwrap();
        assert_eq!(
            params[1],
            InsertValue::File(FileUpload::from_path("take#2.bin").with_mime("video/mp4"))
        );
        for bad in ["id=video/mp4", "nope=video/mp4", "episode", "episode=mp4"] {
            assert!(
                apply_mime_overrides(sql, &mut params, &[bad.into()]).is_err(),
                "{bad}"
            );
        }
        assert!(typed_params(sql, &schema, &["1", "@"]).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn an_at_path_keeps_bytes_that_are_not_utf8_and_other_values_must_be_text() {
        use std::ffi::OsString;
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let schema = parse_columns("id:int64!, episode:file").unwrap();
        let sql = "INSERT INTO r.e (id, episode) VALUES (?, ?)";
        let values = [
            OsString::from("1"),
            OsString::from_vec(b"@take\xff.bin".to_vec()),
        ];
        let params = typed_params(sql, &schema, &values).unwrap();
        assert_eq!(
            params[1],
            InsertValue::File(FileUpload::from_path(OsStr::from_bytes(b"take\xff.bin")))
        );
        let values = [
            OsString::from_vec(b"1\xff".to_vec()),
            OsString::from("@a.bin"),
        ];
        let err = typed_params(sql, &schema, &values).unwrap_err().to_string();
        assert!(err.contains("is not UTF-8 text"), "{err}");
    }
}
