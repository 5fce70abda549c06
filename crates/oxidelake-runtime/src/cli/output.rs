//! Printing results: a table (like datafusion-cli and duckdb), CSV or JSON.

use std::io::Write;
use std::str::FromStr;

use arrow::array::Array;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use oxidelake_core::EngineError;

/// Output format of `oxide sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// A boxed table.
    #[default]
    Table,
    /// RFC 4180 CSV with a header row.
    Csv,
    /// A JSON array of row objects.
    Json,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(format!("format {other:?} is not one of table, csv, json")),
        }
    }
}

fn io(e: std::io::Error) -> EngineError {
    EngineError::io("stdout", e)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_value(data_type: &DataType, text: String) -> String {
    let numeric = data_type.is_numeric() && !text.contains(['N', 'n', 'i']);
    match data_type {
        DataType::Boolean => text,
        _ if numeric => text,
        _ => json_string(&text),
    }
}

/// Writes `batches` to `out` in `format`.
pub fn write_batches(
    batches: &[RecordBatch],
    format: Format,
    out: &mut impl Write,
) -> Result<(), EngineError> {
    match format {
        Format::Table => {
            if batches.iter().all(|b| b.num_rows() == 0) {
                return Ok(());
            }
            let text = arrow::util::pretty::pretty_format_batches(batches)?;
            writeln!(out, "{text}").map_err(io)
        }
        Format::Csv => {
            if let Some(first) = batches.first() {
                let header: Vec<String> = first
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| csv_field(f.name()))
                    .collect();
                writeln!(out, "{}", header.join(",")).map_err(io)?;
            }
            for batch in batches {
                for row in cells(batch)? {
                    let fields: Vec<String> = row
                        .iter()
                        .map(|cell| cell.as_deref().map(csv_field).unwrap_or_default())
                        .collect();
                    writeln!(out, "{}", fields.join(",")).map_err(io)?;
                }
            }
            Ok(())
        }
        Format::Json => {
            let mut rows = Vec::new();
            for batch in batches {
                let schema = batch.schema();
                for row in cells(batch)? {
                    let fields: Vec<String> = schema
                        .fields()
                        .iter()
                        .zip(row)
                        .map(|(field, cell)| {
                            let value = cell.map_or_else(
                                || "null".to_string(),
                                |text| json_value(field.data_type(), text),
                            );
                            format!("{}:{value}", json_string(field.name()))
                        })
                        .collect();
                    rows.push(format!("{{{}}}", fields.join(",")));
                }
            }
            writeln!(out, "[{}]", rows.join(",\n ")).map_err(io)
        }
    }
}

/// Every cell of `batch` as text, row by row (`None` for NULL).
fn cells(batch: &RecordBatch) -> Result<Vec<Vec<Option<String>>>, EngineError> {
    let options = FormatOptions::default();
    let formatters = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..batch.num_rows())
        .map(|row| {
            batch
                .columns()
                .iter()
                .zip(&formatters)
                .map(|(c, f)| (!c.is_null(row)).then(|| f.value(row).to_string()))
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, true),
                Field::new("name", DataType::Utf8, true),
                Field::new("x", DataType::Float64, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(StringArray::from(vec![Some("a,\"b\""), Some("c")])),
                Arc::new(Float64Array::from(vec![Some(0.5), Some(f64::NAN)])),
            ],
        )
        .unwrap()
    }

    fn render(format: Format) -> String {
        let mut out = Vec::new();
        write_batches(&[batch()], format, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn csv_quotes_what_needs_quoting_and_leaves_nulls_empty() {
        assert_eq!(
            render(Format::Csv),
            "k,name,x\n1,\"a,\"\"b\"\"\",0.5\n,c,NaN\n"
        );
    }

    #[test]
    fn json_is_an_array_of_objects_with_typed_values() {
        assert_eq!(
            render(Format::Json),
            "[{\"k\":1,\"name\":\"a,\\\"b\\\"\",\"x\":0.5},\n {\"k\":null,\"name\":\"c\",\"x\":\"NaN\"}]\n"
        );
    }
}
