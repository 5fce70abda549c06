//! The identity of a table's source files: what must be unchanged for an IPC copy to be
//! current.

use datafusion::catalog::Session;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::error::Result;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;

/// One source file as the object store reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FileStamp {
    location: String,
    size: u64,
    last_modified_ns: i64,
    e_tag: Option<String>,
}

/// The sorted stamps of every file under `urls` with `extension`. Lists the store
/// directly (not through DataFusion's list-files cache), so a rewrite is always seen.
pub(crate) async fn fingerprint(
    session: &dyn Session,
    urls: &[ListingTableUrl],
    extension: &str,
) -> Result<Vec<FileStamp>> {
    let mut stamps = Vec::new();
    for url in urls {
        let store = session.runtime_env().object_store(url)?;
        let metas: Vec<object_store::ObjectMeta> = if url.is_collection() {
            store
                .list(Some(url.prefix()))
                .try_filter(|m| futures::future::ready(m.location.as_ref().ends_with(extension)))
                .try_collect()
                .await?
        } else {
            vec![store.head(url.prefix()).await?]
        };
        stamps.extend(metas.into_iter().map(|m| FileStamp {
            location: m.location.to_string(),
            size: m.size,
            last_modified_ns: m.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX),
            e_tag: m.e_tag,
        }));
    }
    stamps.sort();
    Ok(stamps)
}
