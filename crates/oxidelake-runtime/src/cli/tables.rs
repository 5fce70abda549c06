//! `--data DIR`: every Parquet dataset in a folder becomes a table.

use std::path::Path;

use oxidelake_core::EngineError;

use crate::OxideSession;

/// Registers each subdirectory of `dir` holding `.parquet` files (named after the
/// directory) and each `.parquet` file directly in `dir` (named after its stem).
/// Returns the table names, sorted.
pub async fn register_data_dir(
    session: &OxideSession,
    dir: &Path,
) -> Result<Vec<String>, EngineError> {
    let name = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| EngineError::io(&name, e))?;
    let mut tables = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io(&name, e))?;
        let path = entry.path();
        let Some(stem) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if path.is_dir() {
            let has_parquet = std::fs::read_dir(&path)
                .map_err(|e| EngineError::io(path.display().to_string(), e))?
                .filter_map(Result::ok)
                .any(|e| e.path().extension().is_some_and(|x| x == "parquet"));
            if has_parquet {
                let location = format!("{}/", text_path(&path)?);
                session.register_parquet(&stem, &location).await?;
                tables.push(stem);
            }
        } else if path.extension().is_some_and(|x| x == "parquet") {
            session.register_parquet(&stem, text_path(&path)?).await?;
            tables.push(stem);
        }
    }
    tables.sort();
    Ok(tables)
}

/// `path` as text: a table's location is a URL, which DataFusion takes as a string, so
/// a path that is not UTF-8 is refused by name rather than read in a garbled form.
fn text_path(path: &Path) -> Result<&str, EngineError> {
    path.to_str().ok_or_else(|| EngineError::InvalidArgument {
        what: "--data",
        detail: format!(
            "{path:?} is not UTF-8 text: a table's location is a URL, which must be \
             text; rename it"
        ),
    })
}
