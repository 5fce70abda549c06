//! A table's Parquet data files as local paths and URLs, and the check that every file
//! a snapshot lists is on disk with the size its commit recorded.
//!
//! Garbage collection of managed objects computes what is referenced by reading every
//! table's latest snapshot, so a read that silently returns fewer rows deletes committed
//! data. A missing file would read as no rows through a listing table (DataFusion lists a
//! path it cannot find as an empty directory), so every read checks the files first.
//! Paths become URLs with [`url::Url::from_file_path`], never through
//! `ListingTableUrl::parse`, which reads `[`, `?` and `*` in a path as a glob.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use url::Url;

use crate::{CatalogError, Snapshot, TableName};

/// Fails unless every data file of `snapshot` is a regular file of the size the Delta
/// log recorded for it.
pub(crate) fn check_data_files(snapshot: &Snapshot) -> Result<(), CatalogError> {
    for file in &snapshot.files {
        let missing = || CatalogError::MissingDataFile {
            table: snapshot.table.to_string(),
            version: snapshot.version,
            path: file.path.clone(),
        };
        // `metadata` follows symbolic links: a link to a file is that file.
        let metadata = match std::fs::metadata(&file.path) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(missing()),
            Err(e) => return Err(CatalogError::io(&file.path, e)),
        };
        if !metadata.is_file() {
            return Err(missing());
        }
        if metadata.len() != file.size_bytes {
            return Err(CatalogError::DataFileSizeMismatch {
                table: snapshot.table.to_string(),
                version: snapshot.version,
                path: file.path.clone(),
                expected_bytes: file.size_bytes,
                actual_bytes: metadata.len(),
            });
        }
    }
    Ok(())
}

/// The `file://` URL of the absolute local path `path`, percent-encoded as URLs require
/// (a `?` in a directory name becomes `%3F`; nothing is a glob).
pub(crate) fn file_url(table: &TableName, path: &Path) -> Result<Url, CatalogError> {
    Url::from_file_path(path).map_err(|()| CatalogError::InvalidDataFilePath {
        table: table.to_string(),
        path: path.display().to_string(),
        reason: "it is not an absolute local path",
    })
}

/// The local path of the data file that an `add` action names.
///
/// The Delta protocol makes `add.path` a URI reference (percent-encoded) relative to the
/// table root, or an absolute URI; it is resolved against the table directory's URL the
/// way the protocol says, which also decodes it.
pub(crate) fn data_file_path(
    table: &TableName,
    table_dir: &Path,
    add_path: &str,
) -> Result<PathBuf, CatalogError> {
    let invalid = |reason: &'static str| CatalogError::InvalidDataFilePath {
        table: table.to_string(),
        path: add_path.to_owned(),
        reason,
    };
    let root = Url::from_directory_path(table_dir)
        .map_err(|()| invalid("the table directory is not an absolute local path"))?;
    let url = root
        .join(add_path)
        .map_err(|_| invalid("it is not a URI reference"))?;
    if url.scheme() != "file" || url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("it does not name a local file"));
    }
    url.to_file_path()
        .map_err(|()| invalid("it does not name a local file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableName {
        "robots.episodes".parse().unwrap()
    }

    #[test]
    fn add_paths_resolve_relative_to_the_table_and_are_decoded() {
        let dir = Path::new("/data/lake[1]?*/tables/robots/episodes");
        let resolve = |add: &str| data_file_path(&table(), dir, add).unwrap();
        assert_eq!(
            resolve("part-00000-1-c000.snappy.parquet"),
            dir.join("part-00000-1-c000.snappy.parquet")
        );
        assert_eq!(resolve("a%20b.parquet"), dir.join("a b.parquet"));
        assert_eq!(
            resolve("day=1/x.parquet"),
            dir.join("day=1").join("x.parquet")
        );
        assert_eq!(
            resolve("file:///elsewhere/x.parquet"),
            Path::new("/elsewhere/x.parquet")
        );
        for bad in ["s3://bucket/x.parquet", "x.parquet?v=1", "x.parquet#1"] {
            let err = data_file_path(&table(), dir, bad).unwrap_err();
            assert!(
                matches!(err, CatalogError::InvalidDataFilePath { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn file_urls_of_paths_with_glob_characters_round_trip() {
        let path = Path::new("/data/lake[1]?*/tables/robots/episodes/part-0.parquet");
        let url = file_url(&table(), path).unwrap();
        assert_eq!(url.to_file_path().unwrap(), path);
        assert!(file_url(&table(), Path::new("relative.parquet")).is_err());
    }
}
