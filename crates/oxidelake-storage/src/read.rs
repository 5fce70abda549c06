//! Reading lake Parquet through DataFusion with errors sorted at the boundary: a file
//! that does not decode is [`EngineError::Format`], a failed read is [`EngineError::Io`],
//! anything else (a bad query) stays a DataFusion error.

use std::collections::HashSet;
use std::path::Path;

use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use oxidelake_core::EngineError;
use parquet::errors::ParquetError;

use crate::StorageError;
use crate::footer_guard::{MIN_PARQUET_BYTES, TRAILER_BYTES, footer_misfit};
use crate::schema_clash::{find_clash, is_merge_failure};

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

/// The [`StorageError::ParquetFooter`] that [`crate::ParquetFooterGuard`] raised, if it
/// is in `err`'s source chain (DataFusion reports it as an object-store error).
pub fn footer_error_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a StorageError> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(found @ StorageError::ParquetFooter { .. }) = e.downcast_ref::<StorageError>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// `err` as an [`EngineError`]: a Parquet file the footer guard refused becomes
/// [`EngineError::Format`] naming that file; anything else converts as
/// `EngineError::from` does.
pub fn into_engine_error(err: DataFusionError) -> EngineError {
    let refused = match footer_error_in(&err) {
        Some(StorageError::ParquetFooter { path, detail }) => Some((path.clone(), detail.clone())),
        _ => None,
    };
    match refused {
        Some((path, detail)) => EngineError::format(path, detail, err),
        None => err.into(),
    }
}

/// Sorts a DataFusion error from reading `path` into Format / Io / DataFusion. Files of
/// a local table whose schemas do not merge are a Format error naming the column, both
/// types and both files (see `schema_clash`), not an unreadable file.
pub fn classify_read_error(path: &str, err: DataFusionError) -> EngineError {
    if footer_error_in(&err).is_some() {
        return into_engine_error(err);
    }
    if is_merge_failure(&err)
        && let Some(clash) = find_clash(path)
    {
        return clash.into();
    }
    match cause_of(&err) {
        Some(Cause::Format) => EngineError::format(path, "not a readable Parquet file", err),
        Some(Cause::Io) => EngineError::io(path, err),
        None => EngineError::DataFusion(err),
    }
}

/// Checks a local path before DataFusion sees it, for errors that name the file at
/// registration:
/// - a missing path is an I/O error (DataFusion reports a "no files found" plan error);
/// - every `.parquet` file (the path itself, or the files under a directory) must end in
///   a footer length and the `PAR1` magic, with the footer inside the file. DataFusion
///   would read a zero-length file as an empty table; eight bytes read per file rule it
///   out. (The footer length is also what [`crate::ParquetFooterGuard`] checks on every
///   read of a session that installs it; this check covers plain `SessionContext`s.)
///
/// Symlinks are followed deliberately, as DataFusion's `LocalFileSystem` listing follows
/// them: a linked file is checked by its target's length and bytes, a linked directory is
/// walked (once, however many links lead to it), and a broken link is skipped as the
/// listing skips it. Remote URLs are left to DataFusion.
fn preflight(path: &str) -> Result<(), EngineError> {
    if path.contains("://") && !path.starts_with("file://") {
        return Ok(());
    }
    let local = Path::new(path.strip_prefix("file://").unwrap_or(path));
    let meta = std::fs::metadata(local).map_err(|e| EngineError::io(path, e))?;
    if meta.is_file() {
        return check_trailer(local, meta.len());
    }
    let io = |p: &Path, e: std::io::Error| EngineError::io(p.display().to_string(), e);
    let mut walked = HashSet::new();
    let mut dirs = vec![local.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let canonical = std::fs::canonicalize(&dir).map_err(|e| io(&dir, e))?;
        if !walked.insert(canonical) {
            continue;
        }
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let p = entry.map_err(|e| io(&dir, e))?.path();
            // `fs::metadata` follows links; `DirEntry::metadata` would describe the link.
            let meta = match std::fs::metadata(&p) {
                Ok(meta) => meta,
                Err(e) if is_broken_link(&p, &e) => continue,
                Err(e) => return Err(io(&p, e)),
            };
            if meta.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "parquet") {
                check_trailer(&p, meta.len())?;
            }
        }
    }
    Ok(())
}

/// Whether `err`, from following `path`, means `path` is a link to nothing.
fn is_broken_link(path: &Path, err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::NotFound
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn check_trailer(file: &Path, len: u64) -> Result<(), EngineError> {
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
    let mut trailer = [0u8; TRAILER_BYTES];
    let mut f = std::fs::File::open(file).map_err(|e| EngineError::io(&name, e))?;
    f.seek(SeekFrom::End(-(TRAILER_BYTES as i64)))
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
    match footer_misfit(footer, len) {
        Some(detail) => Err(format(detail)),
        None => Ok(()),
    }
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

    #[tokio::test]
    async fn a_column_typed_differently_in_two_files_is_named_with_both_types_and_files() {
        use std::sync::Arc;

        use arrow::array::{ArrayRef, Int64Array, StringArray};
        use arrow::datatypes::{Field, Schema};

        use crate::{LakeWriterOptions, write_parquet_file};

        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, x: ArrayRef| {
            let schema = Arc::new(Schema::new(vec![
                Field::new("id", arrow::datatypes::DataType::Int64, false),
                Field::new("x", x.data_type().clone(), true),
            ]));
            let id: ArrayRef = Arc::new(Int64Array::from(vec![1]));
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![id, x]).unwrap();
            let options = LakeWriterOptions::default();
            write_parquet_file(dir.path().join(name), schema, &[batch], &options).unwrap();
        };
        write("a.parquet", Arc::new(Int64Array::from(vec![Some(7)])));
        write(
            "b.parquet",
            Arc::new(StringArray::from(vec![Some("seven")])),
        );
        // Each file reads on its own.
        for name in ["a.parquet", "b.parquet"] {
            let file = dir.path().join(name).display().to_string();
            read_parquet(&SessionContext::new(), &file).await.unwrap();
        }

        let table = dir.path().display().to_string();
        let err = register_parquet(&SessionContext::new(), "t", &table)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, EngineError::Format { .. }), "{text}");
        for part in ["\"x\"", "Int64", "Utf8", "a.parquet", "b.parquet"] {
            assert!(text.contains(part), "{part} is not named: {text}");
        }
        assert!(!text.contains("not a readable Parquet file"), "{text}");
    }

    #[test]
    fn a_footer_the_guard_refused_is_a_format_error_naming_the_file_not_an_io_error() {
        let refused = || {
            DataFusionError::Context(
                "infer schema".into(),
                Box::new(DataFusionError::ObjectStore(Box::new(
                    object_store::Error::Generic {
                        store: "ParquetFooterGuard",
                        source: Box::new(StorageError::ParquetFooter {
                            path: "lake/bad.parquet".into(),
                            detail: "footer length 80 does not fit in a 20-byte file".into(),
                        }),
                    },
                ))),
            )
        };
        for err in [
            into_engine_error(refused()),
            classify_read_error("lake/", refused()),
        ] {
            match err {
                EngineError::Format { path, detail, .. } => {
                    assert_eq!(path, "lake/bad.parquet");
                    assert!(detail.contains("footer length 80"), "{detail}");
                }
                other => panic!("expected EngineError::Format, got {other:?}"),
            }
        }
        let other = DataFusionError::Execution("boom".into());
        assert!(matches!(
            into_engine_error(other),
            EngineError::DataFusion(_)
        ));
    }
}
