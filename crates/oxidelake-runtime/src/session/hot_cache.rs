//! The hot cache as a session feature: `CACHE TABLE t` (or `oxide sql --cache t`) keeps
//! an Arrow IPC copy of a registered Parquet table that later queries read instead of
//! decoding Parquet; the copy is rebuilt when the Parquet files change (see
//! `oxidelake_storage::HotCache`). Embedded sessions only: a cluster's executors read
//! the lake themselves.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;
use oxidelake_storage::{CachedTableInfo, HotCache, HotCacheCounters};

use super::{OxideSession, SessionMode};

/// Where a session keeps its IPC copies, and the cache once made.
#[derive(Debug, Default)]
pub(crate) struct HotCacheSlot {
    dir: Option<PathBuf>,
    cache: Option<HotCache>,
}

/// `$XDG_CACHE_HOME/oxidelake/hot-cache`, else `~/.cache/oxidelake/hot-cache`, else one
/// under the temporary directory.
fn default_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("oxidelake").join("hot-cache")
}

impl OxideSession {
    /// Keeps this session's IPC copies in `dir` from now on (tables cached before stay
    /// where they are).
    pub fn set_hot_cache_dir(&self, dir: impl Into<PathBuf>) {
        let mut slot = self
            .hot_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = HotCacheSlot {
            dir: Some(dir.into()),
            cache: None,
        };
    }

    fn hot_cache(&self) -> Result<HotCache, EngineError> {
        if let SessionMode::Cluster(url) = &self.mode {
            return Err(EngineError::unsupported(
                "hot cache",
                format!(
                    "the executors behind {url} read the lake themselves; cache tables in embedded sessions"
                ),
            ));
        }
        let mut slot = self
            .hot_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(cache) = &slot.cache {
            return Ok(cache.clone());
        }
        let dir = slot.dir.clone().unwrap_or_else(default_dir);
        let cache = HotCache::local(&dir)?;
        slot.cache = Some(cache.clone());
        Ok(cache)
    }

    /// Builds the IPC copy of table `name` (a registered Parquet table) now and serves
    /// later queries of `name` from it.
    pub async fn cache_table(&self, name: &str) -> Result<CachedTableInfo, EngineError> {
        self.hot_cache()?.cache_table(&self.ctx, name).await
    }

    /// Serves table `name` from its Parquet files again; `false` if it was not cached.
    pub async fn uncache_table(&self, name: &str) -> Result<bool, EngineError> {
        self.hot_cache()?.uncache_table(&self.ctx, name).await
    }

    /// What the session's hot cache has done (zeros before its first use).
    pub fn hot_cache_counters(&self) -> HotCacheCounters {
        let slot = self
            .hot_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.cache
            .as_ref()
            .map(HotCache::counters)
            .unwrap_or_default()
    }

    /// Runs a CACHE / UNCACHE statement; its result is one row saying what happened.
    pub(super) async fn run_cache_statement(
        &self,
        statement: super::cache_statement::CacheStatement,
    ) -> Result<Vec<RecordBatch>, EngineError> {
        use super::cache_statement::CacheStatement;
        match statement {
            CacheStatement::Cache(table) => {
                let info = self.cache_table(&table).await?;
                let schema = Arc::new(Schema::new(vec![
                    Field::new("table", DataType::Utf8, false),
                    Field::new("rows", DataType::UInt64, false),
                    Field::new("ipc_bytes", DataType::UInt64, false),
                    Field::new("source_files", DataType::UInt64, false),
                    Field::new("ipc_path", DataType::Utf8, false),
                ]));
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(StringArray::from(vec![info.table])),
                    Arc::new(UInt64Array::from(vec![info.rows])),
                    Arc::new(UInt64Array::from(vec![info.bytes])),
                    Arc::new(UInt64Array::from(vec![info.source_files as u64])),
                    Arc::new(StringArray::from(vec![info.ipc_path])),
                ];
                Ok(vec![RecordBatch::try_new(schema, columns)?])
            }
            CacheStatement::Uncache { table, if_exists } => {
                let uncached = match self.uncache_table(&table).await {
                    Ok(done) => done,
                    Err(_)
                        if if_exists && self.ctx.table_exist(table.as_str()).ok() != Some(true) =>
                    {
                        false
                    }
                    Err(e) => return Err(e),
                };
                let schema = Arc::new(Schema::new(vec![
                    Field::new("table", DataType::Utf8, false),
                    Field::new("uncached", DataType::Boolean, false),
                ]));
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(StringArray::from(vec![table])),
                    Arc::new(BooleanArray::from(vec![uncached])),
                ];
                Ok(vec![RecordBatch::try_new(schema, columns)?])
            }
        }
    }
}
