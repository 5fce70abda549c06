//! Printing results batch by batch: a boxed table (like datafusion-cli and duckdb),
//! CSV, TSV, JSON, newline-delimited JSON or a Markdown table. The text formats go
//! through arrow's own writers; only the table keeps rows, and at most `--maxrows` of
//! them, so a large result streams through in constant memory.

use std::io::Write;
use std::str::FromStr;

use arrow::datatypes::SchemaRef;
use arrow::json::writer::{JsonArray, LineDelimited, Writer as JsonWriter, WriterBuilder};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use oxidelake_core::EngineError;

/// Output format of `oxide sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// A boxed table, NULL shown as `NULL`.
    #[default]
    Table,
    /// RFC 4180 CSV with a header row; NULL is an empty field.
    Csv,
    /// Tab-separated values with a header row.
    Tsv,
    /// One JSON array of row objects.
    Json,
    /// One JSON object per line.
    NdJson,
    /// A GitHub-flavoured Markdown table.
    Markdown,
    /// A table on a terminal, CSV when stdout is a pipe or a file.
    Automatic,
}

/// The names `--format` and `.mode` accept.
pub const FORMAT_NAMES: &str = "table, csv, tsv, json, ndjson, markdown, automatic";

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "table" | "box" | "duckbox" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "tsv" | "tabs" => Ok(Format::Tsv),
            "json" => Ok(Format::Json),
            "ndjson" | "nd-json" | "jsonlines" => Ok(Format::NdJson),
            "markdown" | "md" => Ok(Format::Markdown),
            "automatic" | "auto" => Ok(Format::Automatic),
            other => Err(format!("format {other:?} is not one of {FORMAT_NAMES}")),
        }
    }
}

impl Format {
    /// `Automatic` decided for where the output goes.
    pub fn resolve(self, stdout_is_terminal: bool) -> Format {
        match self {
            Format::Automatic if stdout_is_terminal => Format::Table,
            Format::Automatic => Format::Csv,
            other => other,
        }
    }
}

/// How many rows the table format shows (`--maxrows`); the other formats print all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxRows {
    /// At most this many.
    Limited(usize),
    /// Every row (`inf`).
    Unlimited,
}

impl Default for MaxRows {
    /// datafusion-cli's default.
    fn default() -> Self {
        MaxRows::Limited(40)
    }
}

impl FromStr for MaxRows {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("inf") {
            return Ok(MaxRows::Unlimited);
        }
        s.parse()
            .map(MaxRows::Limited)
            .map_err(|_| format!("{s:?} is neither a row count nor inf"))
    }
}

/// What a finished result printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Printed {
    /// Rows in the result.
    pub rows: usize,
    /// Rows shown (fewer than `rows` when the table stopped at `--maxrows`).
    pub shown: usize,
}

fn io(e: std::io::Error) -> EngineError {
    EngineError::io("stdout", e)
}

fn table_options() -> FormatOptions<'static> {
    FormatOptions::default().with_null("NULL")
}

enum Sink<'w, W: Write> {
    Table {
        out: &'w mut W,
        max_rows: MaxRows,
        kept: Vec<RecordBatch>,
        kept_rows: usize,
    },
    // Boxed: the writers hold their format options, several times the other variants.
    Csv(Box<arrow::csv::Writer<&'w mut W>>),
    Json(Box<JsonWriter<&'w mut W, JsonArray>>),
    NdJson(Box<JsonWriter<&'w mut W, LineDelimited>>),
    Markdown(&'w mut W),
}

/// Prints one result as its batches arrive.
pub struct ResultPrinter<'w, W: Write> {
    schema: SchemaRef,
    sink: Sink<'w, W>,
    rows: usize,
}

impl<'w, W: Write> ResultPrinter<'w, W> {
    /// A printer of a result with columns `schema` (an `Automatic` format prints CSV:
    /// resolve it first for a terminal).
    pub fn new(
        format: Format,
        max_rows: MaxRows,
        schema: SchemaRef,
        out: &'w mut W,
    ) -> Result<Self, EngineError> {
        let sink = match format.resolve(false) {
            Format::Table => Sink::Table {
                out,
                max_rows,
                kept: Vec::new(),
                kept_rows: 0,
            },
            Format::Csv | Format::Automatic => {
                Sink::Csv(Box::new(arrow::csv::WriterBuilder::new().build(out)))
            }
            Format::Tsv => Sink::Csv(Box::new(
                arrow::csv::WriterBuilder::new()
                    .with_delimiter(b'\t')
                    .build(out),
            )),
            Format::Json => Sink::Json(Box::new(
                WriterBuilder::new().with_explicit_nulls(true).build(out),
            )),
            Format::NdJson => Sink::NdJson(Box::new(
                WriterBuilder::new().with_explicit_nulls(true).build(out),
            )),
            Format::Markdown => {
                let names: Vec<String> = schema
                    .fields()
                    .iter()
                    .map(|f| markdown_cell(f.name()))
                    .collect();
                writeln!(out, "| {} |", names.join(" | ")).map_err(io)?;
                writeln!(out, "|{}", "---|".repeat(names.len())).map_err(io)?;
                Sink::Markdown(out)
            }
        };
        Ok(Self {
            schema,
            sink,
            rows: 0,
        })
    }

    /// Prints (or, for the table, keeps) `batch`.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), EngineError> {
        self.rows += batch.num_rows();
        match &mut self.sink {
            Sink::Table {
                max_rows,
                kept,
                kept_rows,
                ..
            } => {
                let room = match max_rows {
                    MaxRows::Unlimited => batch.num_rows(),
                    MaxRows::Limited(n) => n.saturating_sub(*kept_rows).min(batch.num_rows()),
                };
                if room > 0 {
                    kept.push(batch.slice(0, room));
                    *kept_rows += room;
                }
            }
            // The header goes out with the first batch, an empty one included.
            Sink::Csv(w) => w.write(batch)?,
            Sink::Json(w) => w.write(batch)?,
            Sink::NdJson(w) => w.write(batch)?,
            Sink::Markdown(out) => markdown_rows(batch, out)?,
        }
        Ok(())
    }

    /// Ends the output: prints the table, or closes the JSON array.
    pub fn finish(mut self) -> Result<Printed, EngineError> {
        if self.rows == 0 {
            // An empty result still names its columns.
            let empty = RecordBatch::new_empty(std::sync::Arc::clone(&self.schema));
            if let Sink::Csv(w) = &mut self.sink {
                w.write(&empty)?;
            }
        }
        let shown = match self.sink {
            Sink::Table {
                out,
                mut kept,
                kept_rows,
                ..
            } => {
                if kept.is_empty() {
                    kept.push(RecordBatch::new_empty(std::sync::Arc::clone(&self.schema)));
                }
                let text = arrow::util::pretty::pretty_format_batches_with_options(
                    &kept,
                    &table_options(),
                )?;
                writeln!(out, "{text}").map_err(io)?;
                kept_rows
            }
            Sink::Csv(_) | Sink::NdJson(_) | Sink::Markdown(_) => self.rows,
            Sink::Json(mut w) => {
                w.finish()?;
                writeln!(w.get_mut()).map_err(io)?;
                self.rows
            }
        };
        Ok(Printed {
            rows: self.rows,
            shown,
        })
    }
}

fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn markdown_rows(batch: &RecordBatch, out: &mut impl Write) -> Result<(), EngineError> {
    let options = table_options();
    let formatters = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()?;
    for row in 0..batch.num_rows() {
        let cells: Vec<String> = formatters
            .iter()
            .map(|f| markdown_cell(&f.value(row).to_string()))
            .collect();
        writeln!(out, "| {} |", cells.join(" | ")).map_err(io)?;
    }
    Ok(())
}

/// Prints `batches` (all with columns `schema`) in `format`: a convenience for callers
/// that already hold a whole result.
pub fn write_batches(
    schema: SchemaRef,
    batches: &[RecordBatch],
    format: Format,
    max_rows: MaxRows,
    out: &mut impl Write,
) -> Result<Printed, EngineError> {
    let mut printer = ResultPrinter::new(format, max_rows, schema, out)?;
    for batch in batches {
        printer.write(batch)?;
    }
    printer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
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
                Arc::new(StringArray::from(vec![Some("a,\"b\""), Some("c|d")])),
                Arc::new(Float64Array::from(vec![Some(0.5), None])),
            ],
        )
        .unwrap()
    }

    fn render_with(
        format: Format,
        max_rows: MaxRows,
        batches: &[RecordBatch],
    ) -> (String, Printed) {
        let mut out = Vec::new();
        let printed = write_batches(batch().schema(), batches, format, max_rows, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), printed)
    }

    fn render(format: Format) -> String {
        render_with(format, MaxRows::default(), &[batch()]).0
    }

    #[test]
    fn csv_quotes_what_needs_quoting_and_leaves_nulls_empty() {
        assert_eq!(
            render(Format::Csv),
            "k,name,x\n1,\"a,\"\"b\"\"\",0.5\n,c|d,\n"
        );
    }

    #[test]
    fn tsv_separates_fields_with_tabs_and_quotes_only_fields_with_quotes() {
        assert_eq!(
            render(Format::Tsv),
            "k\tname\tx\n1\t\"a,\"\"b\"\"\"\t0.5\n\tc|d\t\n"
        );
    }

    #[test]
    fn json_is_an_array_of_objects_with_explicit_nulls() {
        assert_eq!(
            render(Format::Json),
            "[{\"k\":1,\"name\":\"a,\\\"b\\\"\",\"x\":0.5},{\"k\":null,\"name\":\"c|d\",\"x\":null}]\n"
        );
    }

    #[test]
    fn ndjson_writes_one_object_per_line() {
        assert_eq!(
            render(Format::NdJson),
            "{\"k\":1,\"name\":\"a,\\\"b\\\"\",\"x\":0.5}\n{\"k\":null,\"name\":\"c|d\",\"x\":null}\n"
        );
    }

    #[test]
    fn markdown_escapes_pipes_and_shows_null() {
        assert_eq!(
            render(Format::Markdown),
            "| k | name | x |\n|---|---|---|\n| 1 | a,\"b\" | 0.5 |\n| NULL | c\\|d | NULL |\n"
        );
    }

    #[test]
    fn the_table_shows_null_as_null() {
        let text = render(Format::Table);
        assert!(text.contains("| NULL | c|d   | NULL |"), "{text}");
    }

    #[test]
    fn the_table_stops_at_max_rows_but_counts_every_row() {
        let batches = [batch(), batch()];
        let (text, printed) = render_with(Format::Table, MaxRows::Limited(3), &batches);
        assert_eq!(printed, Printed { rows: 4, shown: 3 });
        assert_eq!(text.matches("| 1 ").count(), 2, "{text}");
        let (_, printed) = render_with(Format::Table, MaxRows::Unlimited, &batches);
        assert_eq!(printed, Printed { rows: 4, shown: 4 });
    }

    #[test]
    fn an_empty_result_still_prints_its_header() {
        for (format, header) in [
            (Format::Table, "| k | name | x |"),
            (Format::Csv, "k,name,x"),
            (Format::Markdown, "| k | name | x |"),
            (Format::Json, "[]"),
        ] {
            let (text, printed) = render_with(format, MaxRows::default(), &[]);
            assert!(text.contains(header), "{format:?}: {text}");
            assert_eq!(printed.rows, 0);
        }
    }

    #[test]
    fn formats_and_row_limits_parse_from_their_names() {
        assert_eq!("ndjson".parse::<Format>(), Ok(Format::NdJson));
        assert_eq!("MARKDOWN".parse::<Format>(), Ok(Format::Markdown));
        assert!("yaml".parse::<Format>().unwrap_err().contains("ndjson"));
        assert_eq!(Format::Automatic.resolve(true), Format::Table);
        assert_eq!(Format::Automatic.resolve(false), Format::Csv);
        assert_eq!("inf".parse::<MaxRows>(), Ok(MaxRows::Unlimited));
        assert_eq!("7".parse::<MaxRows>(), Ok(MaxRows::Limited(7)));
        assert!("-1".parse::<MaxRows>().is_err());
    }
}
