//! Which files of a table disagree on a column's type.
//!
//! DataFusion infers the schema of a directory of Parquet files by merging every file's
//! schema (`Schema::try_merge`, files in path order, field metadata cleared). A column
//! typed one way in one file and another way in a second fails that merge with an Arrow
//! schema error that names the column and the types but no file — and that, being an
//! Arrow schema error, read as "not a readable Parquet file" although every file reads
//! (issue 44). When a read fails with a merge error, the files are merged again here, the
//! same way, to find the first column that does not merge and the two files it comes
//! from: [`StorageError::ColumnTypeClash`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use arrow::datatypes::Field;
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::StorageError;
use crate::error::ColumnTypeClash;

/// The start of the message of every failed merge of two fields (arrow-schema 59).
const MERGE_FAILURE: &str = "Fail to merge schema field";

/// Whether `err`'s source chain holds Arrow's error for two fields that do not merge.
pub(crate) fn is_merge_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(ArrowError::SchemaError(message)) = e.downcast_ref::<ArrowError>()
            && message.starts_with(MERGE_FAILURE)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// The first column that two Parquet files of the local table at `table` (a `file://`
/// URL or a path; a directory: a single file cannot clash) type in ways that do not
/// merge, with both files, or `None` when the files merge (or cannot be read: that is
/// another error).
pub(crate) fn find_clash(table: &str) -> Option<StorageError> {
    let local = Path::new(table.strip_prefix("file://").unwrap_or(table));
    if !std::fs::metadata(local).is_ok_and(|meta| meta.is_dir()) {
        return None;
    }
    // Per column: the fields merged so far, and the first file that had it.
    let mut merged: HashMap<String, (Field, PathBuf)> = HashMap::new();
    for file in table_files(local) {
        let Some(schema) = arrow_schema(&file) else {
            continue;
        };
        for field in schema.fields() {
            let field = field.as_ref().clone().with_metadata(Default::default());
            match merged.get_mut(field.name()) {
                None => {
                    merged.insert(field.name().clone(), (field, file.clone()));
                }
                Some((so_far, first_file)) => {
                    let mut attempt = so_far.clone();
                    if attempt.try_merge(&field).is_err() {
                        return Some(StorageError::ColumnTypeClash(Box::new(ColumnTypeClash {
                            table: table.to_string(),
                            column: field.name().clone(),
                            first_file: first_file.display().to_string(),
                            first_type: so_far.data_type().clone(),
                            second_file: file.display().to_string(),
                            second_type: field.data_type().clone(),
                        })));
                    }
                    *so_far = attempt;
                }
            }
        }
    }
    None
}

/// The Arrow schema of the Parquet file `file`, as its footer declares it.
fn arrow_schema(file: &Path) -> Option<arrow::datatypes::SchemaRef> {
    let reader = std::fs::File::open(file).ok()?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(reader).ok()?;
    Some(std::sync::Arc::clone(builder.schema()))
}

/// The `.parquet` files a listing table over `dir` reads, in the order DataFusion merges
/// their schemas: the directory's own files and those of its partition directories
/// (`key=value`, at any depth; DataFusion ignores other subdirectories), sorted by path.
/// Links are followed, as DataFusion's local listing follows them.
fn table_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut walked = HashSet::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(canonical) = std::fs::canonicalize(&dir) else {
            continue;
        };
        if !walked.insert(canonical) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|entry| entry.path()) {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if meta.is_dir() {
                if name.is_some_and(|n| n.contains('=')) {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "parquet") {
                files.push(path);
            }
        }
    }
    files.sort_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    files
}
