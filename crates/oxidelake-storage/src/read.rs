//! Reading lake Parquet through DataFusion with errors sorted at the boundary: a file
//! that does not decode is [`EngineError::Format`], a failed read is [`EngineError::Io`],
//! anything else (a bad query) stays a DataFusion error.

use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use oxidelake_core::EngineError;
use parquet::errors::ParquetError;

/// What an error chain says went wrong with a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// The bytes are not valid Parquet.
    Format,
    /// The bytes could not be read.
    Io,
}

fn cause_of(err: &(dyn std::error::Error + 'static)) -> Option<Cause> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(p) = e.downcast_ref::<ParquetError>() {
            return Some(match p {
                ParquetError::External(inner) if is_io(inner.as_ref()) => Cause::Io,
                _ => Cause::Format,
            });
        }
        if let Some(a) = e.downcast_ref::<ArrowError>() {
            match a {
                ArrowError::IoError(..) => return Some(Cause::Io),
                ArrowError::ParquetError(_)
                | ArrowError::IpcError(_)
                | ArrowError::InvalidArgumentError(_)
                | ArrowError::SchemaError(_)
                | ArrowError::ParseError(_) => return Some(Cause::Format),
                _ => {}
            }
        }
        if e.downcast_ref::<object_store::Error>().is_some()
            || e.downcast_ref::<std::io::Error>().is_some()
        {
            return Some(Cause::Io);
        }
        if let Some(DataFusionError::ParquetError(_)) = e.downcast_ref::<DataFusionError>() {
            return Some(Cause::Format);
        }
        next = e.source();
    }
    None
}

fn is_io(err: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    err.downcast_ref::<std::io::Error>().is_some()
        || err.downcast_ref::<object_store::Error>().is_some()
}

/// Sorts a DataFusion error from reading `path` into Format / Io / DataFusion.
pub fn classify_read_error(path: &str, err: DataFusionError) -> EngineError {
    match cause_of(&err) {
        Some(Cause::Format) => EngineError::format(path, "not a readable Parquet file", err),
        Some(Cause::Io) => EngineError::io(path, err),
        None => EngineError::DataFusion(err),
    }
}

/// Parquet's smallest possible file: leading magic, footer length, trailing magic.
const MIN_PARQUET_BYTES: u64 = 12;

/// Checks a local path before DataFusion sees it:
/// - a missing path is an I/O error (DataFusion reports a "no files found" plan error);
/// - every `.parquet` file (the path itself, or the files under a directory) must end in
///   a footer length and the `PAR1` magic, with the footer inside the file. DataFusion
///   would read a zero-length file as an empty table, and parquet 59.3.2's metadata
///   decoder underflows (a panic in builds with overflow checks) on a footer length
///   larger than the file; eight bytes read per file rule both out.
///
/// Remote URLs are left to DataFusion.
fn preflight(path: &str) -> Result<(), EngineError> {
    if path.contains("://") && !path.starts_with("file://") {
        return Ok(());
    }
    let local = std::path::Path::new(path.strip_prefix("file://").unwrap_or(path));
    let meta = std::fs::metadata(local).map_err(|e| EngineError::io(path, e))?;
    if meta.is_file() {
        return check_trailer(local, meta.len());
    }
    let mut dirs = vec![local.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| EngineError::io(dir.display().to_string(), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| EngineError::io(dir.display().to_string(), e))?;
            let p = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| EngineError::io(p.display().to_string(), e))?;
            if kind.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "parquet") {
                let len = entry
                    .metadata()
                    .map_err(|e| EngineError::io(p.display().to_string(), e))?
                    .len();
                check_trailer(&p, len)?;
            }
        }
    }
    Ok(())
}

fn check_trailer(file: &std::path::Path, len: u64) -> Result<(), EngineError> {
    use std::io::{Read, Seek, SeekFrom};
    let name = file.display().to_string();
    let format = |detail: String| EngineError::Format {
        path: name.clone(),
        detail,
        source: None,
    };
    if len < MIN_PARQUET_BYTES {
        return Err(format(format!(
            "{len} bytes is shorter than the smallest Parquet file ({MIN_PARQUET_BYTES})"
        )));
    }
    let mut trailer = [0u8; 8];
    let mut f = std::fs::File::open(file).map_err(|e| EngineError::io(&name, e))?;
    f.seek(SeekFrom::End(-8))
        .and_then(|_| f.read_exact(&mut trailer))
        .map_err(|e| EngineError::io(&name, e))?;
    if &trailer[4..] != b"PAR1" {
        return Err(format(format!(
            "file does not end in the Parquet magic PAR1 (found \"{}\")",
            trailer[4..].escape_ascii()
        )));
    }
    let footer = u64::from(u32::from_le_bytes([
        trailer[0], trailer[1], trailer[2], trailer[3],
    ]));
    if footer + MIN_PARQUET_BYTES > len {
        return Err(format(format!(
            "footer length {footer} does not fit in a {len}-byte file"
        )));
    }
    Ok(())
}

/// Registers the Parquet file or directory at `path` as table `name` of `ctx`.
pub async fn register_parquet(
    ctx: &SessionContext,
    name: &str,
    path: &str,
) -> Result<(), EngineError> {
    preflight(path)?;
    ctx.register_parquet(name, path, ParquetReadOptions::default())
        .await
        .map_err(|e| classify_read_error(path, e))
}

/// Reads every row of the Parquet file or directory at `path`.
pub async fn read_parquet(
    ctx: &SessionContext,
    path: &str,
) -> Result<Vec<RecordBatch>, EngineError> {
    preflight(path)?;
    let frame = ctx
        .read_parquet(path, ParquetReadOptions::default())
        .await
        .map_err(|e| classify_read_error(path, e))?;
    frame
        .collect()
        .await
        .map_err(|e| classify_read_error(path, e))
}

/// Runs `sql` on `ctx`, attributing read failures to `source` (the table's location).
pub async fn query(
    ctx: &SessionContext,
    sql: &str,
    source: &str,
) -> Result<Vec<RecordBatch>, EngineError> {
    let frame = ctx
        .sql(sql)
        .await
        .map_err(|e| classify_read_error(source, e))?;
    frame
        .collect()
        .await
        .map_err(|e| classify_read_error(source, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parquet_errors_are_format_io_errors_are_io_and_plan_errors_stay_datafusion() {
        let parquet = DataFusionError::ParquetError(Box::new(ParquetError::General("bad".into())));
        assert!(matches!(
            classify_read_error("f", parquet),
            EngineError::Format { .. }
        ));
        let nested = DataFusionError::Context(
            "scan".into(),
            Box::new(DataFusionError::ArrowError(
                Box::new(ArrowError::ParquetError("corrupt page".into())),
                None,
            )),
        );
        assert!(matches!(
            classify_read_error("f", nested),
            EngineError::Format { .. }
        ));
        let io = DataFusionError::IoError(std::io::Error::other("disk"));
        assert!(matches!(
            classify_read_error("f", io),
            EngineError::Io { .. }
        ));
        let plan = DataFusionError::Plan("no such table".into());
        assert!(matches!(
            classify_read_error("f", plan),
            EngineError::DataFusion(_)
        ));
    }
}
