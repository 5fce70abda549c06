//! [`Catalog`]: where tables live on disk, and how a table's Delta log is opened.

use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use deltalake_core::DeltaTable;

use crate::delta_log::LogListing;
use crate::table_name::is_dir_name;
use crate::{CatalogError, TableName};

/// Directory under the data directory that holds every table, as `<ns>/<table>/`.
const TABLES_DIR: &str = "tables";

/// Namespaced versioned tables under one local data directory.
///
/// The catalog keeps no state in memory besides its root: every call reads the table's
/// Delta log afresh, so several `Catalog` values (or processes) on the same directory see
/// each other's commits, and the commit log is the only arbiter of versions.
#[derive(Debug, Clone)]
pub struct Catalog {
    tables_dir: PathBuf,
}

/// What a table is at one version.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    /// The table.
    pub name: TableName,
    /// Its version when this was read (0 = just created, no rows).
    pub version: i64,
    /// Its schema at that version.
    pub schema: SchemaRef,
    /// Its Delta table directory.
    pub location: PathBuf,
}

impl Catalog {
    /// Opens (creating if needed) the catalog of the data directory `data_dir`; tables
    /// live under `<data_dir>/tables/<ns>/<table>/`.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, CatalogError> {
        let tables_dir = data_dir.as_ref().join(TABLES_DIR);
        std::fs::create_dir_all(&tables_dir).map_err(|e| CatalogError::io(&tables_dir, e))?;
        // Canonical, so that the file paths handed to DataFusion are absolute and stable.
        let tables_dir =
            std::fs::canonicalize(&tables_dir).map_err(|e| CatalogError::io(&tables_dir, e))?;
        if tables_dir.to_str().is_none() {
            return Err(CatalogError::InvalidDataDir {
                path: tables_dir,
                reason: "the path is not UTF-8, so it cannot be a table URL",
            });
        }
        Ok(Self { tables_dir })
    }

    /// The Delta table directory of `name` (whether or not the table exists).
    pub fn table_dir(&self, name: &TableName) -> PathBuf {
        self.tables_dir.join(name.namespace()).join(name.table())
    }

    /// Every table of the catalog, sorted by name.
    ///
    /// A directory `<ns>/<table>` is a table once its Delta log holds a commit or a
    /// checkpoint (version 0's commit is the first file `create_table` lands). Garbage
    /// collection of managed objects treats the objects of a table missing from this list
    /// as unreferenced, so the list never leaves a table out silently:
    ///
    /// * Symbolic links are followed: a namespace or table directory may be a link to a
    ///   directory elsewhere, and its tables are listed like any other.
    /// * An entry that cannot be examined — a dangling link, a directory that cannot be
    ///   read — fails the whole call with [`CatalogError::Io`] rather than being skipped.
    /// * A `_delta_log` with no commit at all (a `create_table` interrupted before
    ///   version 0 landed) holds no rows; that directory is skipped with a warning, and
    ///   [`Catalog::snapshot`] calls it [`CatalogError::TableNotFound`].
    /// * Directories not named as the catalog names them (lower-case identifiers) are not
    ///   catalog tables, which no catalog call can create or open; they are skipped with a
    ///   warning, and a namespace of such a name is not read at all (so that, say, a
    ///   `lost+found` of a mount point does not fail the listing).
    pub fn list_tables(&self) -> Result<Vec<TableName>, CatalogError> {
        let mut names = Vec::new();
        for ns in subdirectories(&self.tables_dir)? {
            let ns_dir = self.tables_dir.join(&ns);
            if !is_dir_name(&ns) {
                tracing::warn!(dir = %ns_dir.display(), "not a namespace name; skipped");
                continue;
            }
            for table in subdirectories(&ns_dir)? {
                let table_dir = ns_dir.join(&table);
                match LogListing::read(&table_dir)? {
                    None => continue,
                    Some(listing) if !listing.has_versions() => {
                        tracing::warn!(
                            dir = %table_dir.display(),
                            "Delta log without any commit (an interrupted create_table); skipped"
                        );
                        continue;
                    }
                    Some(_) => {}
                }
                match TableName::from_dir_names(&ns, &table) {
                    Some(name) => names.push(name),
                    None => tracing::warn!(
                        dir = %table_dir.display(),
                        "Delta table under a name the catalog cannot open; skipped"
                    ),
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The table's latest committed version (0 right after `create_table`).
    pub async fn version(&self, name: &TableName) -> Result<i64, CatalogError> {
        let table = self.open_delta(name, None).await?;
        loaded_version(name, &table)
    }

    /// The table's schema at its latest version.
    pub async fn schema(&self, name: &TableName) -> Result<SchemaRef, CatalogError> {
        Ok(self.table_info(name).await?.schema)
    }

    /// Name, latest version, schema and location of the table.
    pub async fn table_info(&self, name: &TableName) -> Result<TableInfo, CatalogError> {
        let table = self.open_delta(name, None).await?;
        self.info_of(name, &table)
    }

    /// Builds a [`TableInfo`] from a loaded Delta table.
    pub(crate) fn info_of(
        &self,
        name: &TableName,
        table: &DeltaTable,
    ) -> Result<TableInfo, CatalogError> {
        let state = table.snapshot().map_err(|e| CatalogError::delta(name, e))?;
        Ok(TableInfo {
            name: name.clone(),
            version: loaded_version(name, table)?,
            schema: state.snapshot().arrow_schema(),
            location: self.table_dir(name),
        })
    }

    /// The table's location as the URL Delta wants (a `file://` directory URL).
    pub(crate) fn table_url_string(&self, name: &TableName) -> Result<String, CatalogError> {
        let dir = self.table_dir(name);
        dir.to_str()
            .map(str::to_owned)
            .ok_or(CatalogError::InvalidDataDir {
                path: dir,
                reason: "the path is not UTF-8, so it cannot be a table URL",
            })
    }

    /// Opens the table's Delta log at `version` (latest when `None`).
    ///
    /// A table whose directory has no Delta log, or one without any commit (an
    /// interrupted create), is [`CatalogError::TableNotFound`]; the check comes first so
    /// that reading a missing table creates no directories. Before delta-rs replays the
    /// log, every commit file it will read is checked to be whole (see `delta_log`), so a
    /// damaged one is [`CatalogError::CorruptLogEntry`], not a version with fewer rows.
    pub(crate) async fn open_delta(
        &self,
        name: &TableName,
        version: Option<i64>,
    ) -> Result<DeltaTable, CatalogError> {
        let dir = self.table_dir(name);
        let listing = match LogListing::read(&dir)? {
            Some(listing) if listing.has_versions() => listing,
            _ => {
                return Err(CatalogError::TableNotFound {
                    table: name.to_string(),
                });
            }
        };
        if let Some(latest) = listing.latest_commit() {
            // The latest version is loaded first, then (if asked) the older one; a version
            // the table does not have is reported below, after the load.
            let from = version
                .and_then(|v| u64::try_from(v).ok())
                .filter(|v| *v <= latest)
                .unwrap_or(latest);
            listing.check_replay(name, &dir, from, latest)?;
        }
        let url = deltalake_core::ensure_table_uri(self.table_url_string(name)?)
            .map_err(|e| CatalogError::delta(name, e))?;
        let mut table = deltalake_core::open_table(url).await.map_err(|e| match e {
            deltalake_core::DeltaTableError::NotATable(_) => CatalogError::TableNotFound {
                table: name.to_string(),
            },
            other => CatalogError::delta(name, other),
        })?;
        let Some(wanted) = version else {
            return Ok(table);
        };
        let latest = loaded_version(name, &table)?;
        if wanted == latest {
            return Ok(table);
        }
        let not_found = || CatalogError::VersionNotFound {
            table: name.to_string(),
            version: wanted,
            latest,
        };
        if wanted < 0 || wanted > latest {
            return Err(not_found());
        }
        let wanted_u64 = u64::try_from(wanted).map_err(|_| not_found())?;
        table
            .load_version(wanted_u64)
            .await
            .map_err(|e| CatalogError::delta(name, e))?;
        Ok(table)
    }
}

/// The version a Delta table is loaded at, as the catalog's `i64`.
pub(crate) fn loaded_version(name: &TableName, table: &DeltaTable) -> Result<i64, CatalogError> {
    let version = table.version().ok_or_else(|| CatalogError::TableNotFound {
        table: name.to_string(),
    })?;
    // Delta versions are u64; no table reaches 2^63 commits, so this saturation never
    // changes a real value.
    Ok(i64::try_from(version).unwrap_or(i64::MAX))
}

/// The names of the directories in `dir`, following symbolic links.
///
/// `DirEntry::file_type` does not follow links, so a linked directory would look like a
/// file; `std::fs::metadata` does, and fails on a dangling link, which is an error here
/// like a directory that cannot be read. Names that are not UTF-8 cannot be catalog names
/// and are skipped with a warning.
fn subdirectories(dir: &Path) -> Result<Vec<String>, CatalogError> {
    let entries = std::fs::read_dir(dir).map_err(|e| CatalogError::io(dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CatalogError::io(dir, e))?;
        let path = entry.path();
        let metadata = std::fs::metadata(&path).map_err(|e| CatalogError::io(&path, e))?;
        if !metadata.is_dir() {
            continue;
        }
        match entry.file_name().into_string() {
            Ok(name) => names.push(name),
            Err(_) => tracing::warn!(dir = %path.display(), "directory name is not UTF-8; skipped"),
        }
    }
    Ok(names)
}
