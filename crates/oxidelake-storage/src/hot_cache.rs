//! The hot cache: an Arrow IPC copy of a Parquet table that later queries read instead
//! of decoding Parquet again.
//!
//! [`HotCache::cache_table`] replaces a registered Parquet table of a session with a
//! [`CachedTable`](table::CachedTable). Every scan of it first lists the source files
//! (path, size, modification time, e-tag); when that fingerprint differs from the one
//! the IPC copy was made from, the copy is rebuilt from the Parquet source, otherwise the
//! scan serves the copy. The copy is held in memory as the IPC file's bytes decoded in
//! place (64-byte-aligned column buffers, nothing copied; see [`crate::ipc`]), and also
//! written to the cache's store. A repeat query therefore reads no file and decodes no
//! Parquet, and a cached table never returns stale rows after its Parquet changes. The
//! memory is the table's size in Arrow; `CachedTableInfo::bytes` says how much.
//!
//! The IPC file is named after the table *and* its source (`{name}-{hash}.arrow`, the
//! hash over the canonical source URLs, extension and schema; see `key.rs`): two tables
//! of the same name over different files — in two sessions, or registered again from
//! another directory — each get their own copy instead of overwriting one another's.

mod fingerprint;
mod key;
mod table;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datafusion::catalog::TableProvider;
use datafusion::datasource::listing::ListingTable;
use datafusion::prelude::SessionContext;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use oxidelake_core::EngineError;

use table::CachedTable;

/// Counters of what the cache did, for tests, EXPLAIN-side diagnostics and the TUI.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HotCacheCounters {
    /// Scans served from an IPC copy.
    pub ipc_scans: u64,
    /// IPC copies (re)built from Parquet.
    pub builds: u64,
    /// Bytes of IPC written.
    pub bytes_written: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    ipc_scans: AtomicU64,
    builds: AtomicU64,
    bytes_written: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> HotCacheCounters {
        HotCacheCounters {
            ipc_scans: self.ipc_scans.load(Ordering::Relaxed),
            builds: self.builds.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}

/// Where IPC copies live, and what the cache has done.
#[derive(Debug, Clone)]
pub struct HotCache {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    counters: Arc<Counters>,
}

/// A table now served by the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedTableInfo {
    /// Table name.
    pub table: String,
    /// The IPC copy, inside the cache's store.
    pub ipc_path: String,
    /// Source files the copy was made from.
    pub source_files: usize,
    /// Rows in the copy.
    pub rows: u64,
    /// Bytes of the copy.
    pub bytes: u64,
}

impl HotCache {
    /// A cache keeping its IPC files under `prefix` of `store`.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<Path>) -> Self {
        Self {
            store,
            prefix: prefix.into(),
            counters: Arc::new(Counters::default()),
        }
    }

    /// A cache keeping its IPC files in the local directory `dir` (created if missing).
    pub fn local(dir: impl AsRef<std::path::Path>) -> Result<Self, EngineError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| EngineError::io(dir.display().to_string(), e))?;
        let store = LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| EngineError::io(dir.display().to_string(), e))?;
        Ok(Self::new(Arc::new(store), Path::from("")))
    }

    /// What the cache has done so far.
    pub fn counters(&self) -> HotCacheCounters {
        self.counters.snapshot()
    }

    /// Caches table `name` of `ctx` (a Parquet listing table, or a table cached before):
    /// builds its IPC copy now and makes later queries of `name` read it.
    pub async fn cache_table(
        &self,
        ctx: &SessionContext,
        name: &str,
    ) -> Result<CachedTableInfo, EngineError> {
        let provider = ctx.table_provider(name).await?;
        let source: Arc<dyn TableProvider> = match provider.downcast_ref::<CachedTable>() {
            Some(cached) => Arc::clone(cached.source()),
            None => provider,
        };
        let Some(listing) = source.downcast_ref::<ListingTable>() else {
            return Err(EngineError::unsupported(
                "hot cache",
                format!("table {name} is not a file-backed (listing) table"),
            ));
        };
        let urls = listing.table_paths().clone();
        let extension = listing.options().file_extension.clone();
        let file_name = key::ipc_file_name(name, &urls, &extension, &source.schema());
        let ipc_path = self.prefix.clone().join(file_name);
        let table = CachedTable::new(
            Arc::clone(&source),
            urls,
            extension,
            Arc::clone(&self.store),
            ipc_path.clone(),
            Arc::clone(&self.counters),
        );
        let state = ctx.state();
        let built = table.refresh(&state).await?;
        ctx.deregister_table(name)?;
        ctx.register_table(name, Arc::new(table))?;
        Ok(CachedTableInfo {
            table: name.to_string(),
            ipc_path: ipc_path.to_string(),
            source_files: built.source_files,
            rows: built.rows,
            bytes: built.bytes,
        })
    }

    /// Serves table `name` of `ctx` from its Parquet source again. `Ok(false)` when the
    /// table was not cached (nothing changes). The IPC copy stays in the store; caching
    /// the table again rebuilds it.
    pub async fn uncache_table(
        &self,
        ctx: &SessionContext,
        name: &str,
    ) -> Result<bool, EngineError> {
        let provider = ctx.table_provider(name).await?;
        let Some(cached) = provider.downcast_ref::<CachedTable>() else {
            return Ok(false);
        };
        let source = Arc::clone(cached.source());
        ctx.deregister_table(name)?;
        ctx.register_table(name, source)?;
        Ok(true)
    }
}
