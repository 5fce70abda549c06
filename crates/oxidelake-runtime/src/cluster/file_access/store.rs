//! The scheduler's object stores behind its allowed roots.
//!
//! Every store a guarded session resolves (`RuntimeEnv::object_store`, which every
//! DataFusion reader and lister calls) comes back wrapped in a [`RootedStore`]: each call
//! names its paths, and a path outside the roots is refused before the call reaches the
//! store. So whatever the scheduler reads, lists or writes for a session — a scan's file
//! listing and Parquet footers while it plans, `CREATE EXTERNAL TABLE`'s schema and
//! partition inference, a URL table, a statement DataFusion gains later — passes the
//! same check first, and a file met while listing a directory inside a root is checked
//! again (symbolic links included) when it is read.
//!
//! ```text
//!  DataFusion on the scheduler ── get_store(url) ──► RootedRegistry
//!        │ list / head / get / put (path)                 │ wraps the store
//!        ▼                                                ▼
//!  RootedStore ── outside the roots? ──► PermissionDenied (the refusal's words)
//!        │ otherwise unchanged
//!        ▼
//!  the registered store (ParquetFooterGuard over LocalFileSystem, S3, …)
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::execution::object_store::{ObjectStoreRegistry, ObjectStoreUrl};
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use url::Url;

use super::FileAccess;

/// What a refusal calls each kind of call.
const READING: &str = "reading";
const LISTING: &str = "listing";
const WRITING: &str = "writing";

/// An object-store registry whose stores are handed out behind the roots.
#[derive(Debug)]
pub(super) struct RootedRegistry {
    inner: Arc<dyn ObjectStoreRegistry>,
    access: Arc<FileAccess>,
}

impl RootedRegistry {
    /// The stores of `inner`, each behind `access`.
    pub(super) fn new(inner: Arc<dyn ObjectStoreRegistry>, access: Arc<FileAccess>) -> Self {
        Self { inner, access }
    }
}

impl ObjectStoreRegistry for RootedRegistry {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.inner.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> datafusion::error::Result<Arc<dyn ObjectStore>> {
        self.inner.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> datafusion::error::Result<Arc<dyn ObjectStore>> {
        let inner = self.inner.get_store(url)?;
        Ok(Arc::new(RootedStore {
            inner,
            store: store_url(url)?,
            access: Arc::clone(&self.access),
        }))
    }
}

/// The store `url` lives in (its scheme and authority), as the registry keys it and as
/// [`super::AllowedRoot`] names a root's store.
fn store_url(url: &Url) -> datafusion::error::Result<ObjectStoreUrl> {
    ObjectStoreUrl::parse(format!(
        "{}://{}",
        url.scheme(),
        &url[url::Position::BeforeHost..url::Position::AfterPort]
    ))
}

/// An object store whose every call is refused when one of its paths lies outside the
/// roots (see the module docs).
#[derive(Debug)]
struct RootedStore {
    inner: Arc<dyn ObjectStore>,
    /// Which store `inner` is, for the roots' comparison.
    store: ObjectStoreUrl,
    access: Arc<FileAccess>,
}

impl RootedStore {
    fn admit(&self, what: &str, path: &Path) -> Result<()> {
        admit_path(&self.access, &self.store, what, path)
    }

    /// A listing under `prefix`; `None` lists the whole store.
    fn admit_listing(&self, prefix: Option<&Path>) -> Result<()> {
        let whole_store = Path::default();
        self.admit(LISTING, prefix.unwrap_or(&whole_store))
    }
}

/// `Ok` when `access` allows `what` on `path` in `store`, else the refusal as the
/// `object_store` error a store without the permission gives.
fn admit_path(access: &FileAccess, store: &ObjectStoreUrl, what: &str, path: &Path) -> Result<()> {
    access
        .admit(what, store, path)
        .map_err(|reason| object_store::Error::PermissionDenied {
            path: path.to_string(),
            source: reason.into(),
        })
}

impl fmt::Display for RootedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AllowedRoots({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for RootedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.admit(WRITING, location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.admit(WRITING, location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.admit(READING, location)?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.admit(READING, location)?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let (access, store) = (Arc::clone(&self.access), self.store.clone());
        let admitted = locations
            .map(move |location: Result<Path>| -> Result<Path> {
                let location = location?;
                admit_path(&access, &store, WRITING, &location)?;
                Ok(location)
            })
            .boxed();
        self.inner.delete_stream(admitted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.admit_listing(prefix) {
            Ok(()) => self.inner.list(prefix),
            Err(e) => futures::stream::iter([Err(e)]).boxed(),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.admit_listing(prefix) {
            Ok(()) => self.inner.list_with_offset(prefix, offset),
            Err(e) => futures::stream::iter([Err(e)]).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.admit_listing(prefix)?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.admit(READING, from)?;
        self.admit(WRITING, to)?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.admit(WRITING, from)?;
        self.admit(WRITING, to)?;
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use datafusion::execution::runtime_env::RuntimeEnv;
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;

    use super::super::AllowedRoot;
    use super::*;

    /// The local store of a runtime whose registry is guarded by `root`.
    fn guarded_local_store(root: &std::path::Path) -> Arc<dyn ObjectStore> {
        let access = Arc::new(FileAccess::new(vec![
            AllowedRoot::parse(root.to_str().unwrap()).unwrap(),
        ]));
        let env = RuntimeEnv::default();
        let registry = RootedRegistry::new(Arc::clone(&env.object_store_registry), access);
        let local = ObjectStoreUrl::local_filesystem();
        let url: &Url = local.as_ref();
        registry.get_store(url).unwrap()
    }

    fn store_path(path: &std::path::Path) -> Path {
        Path::from_absolute_path(std::fs::canonicalize(path).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_guarded_store_refuses_reads_outside_the_roots_alike_for_existing_and_missing_paths()
    {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("lake"), dir.path().join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("in.csv"), b"visible\n").unwrap();
        std::fs::write(outside.join("creds.txt"), b"root:SECRET-HASH\n").unwrap();
        let store = guarded_local_store(&root);

        let inside = store_path(&root.join("in.csv"));
        let bytes = store.get(&inside).await.unwrap().bytes().await.unwrap();
        assert_eq!(&bytes[..], b"visible\n", "a file inside the root is read");

        let outside_dir = store_path(&outside);
        let (existing, missing) = (
            outside_dir.clone().join("creds.txt"),
            outside_dir.clone().join("absent.txt"),
        );
        let mut refusals = Vec::new();
        for path in [&existing, &missing] {
            let read = store.get(path).await.unwrap_err();
            assert!(
                matches!(read, object_store::Error::PermissionDenied { .. }),
                "{read}"
            );
            let head = store.head(path).await.unwrap_err();
            let listed = store
                .list(Some(path))
                .try_collect::<Vec<_>>()
                .await
                .unwrap_err();
            let delimited = store.list_with_delimiter(Some(path)).await.unwrap_err();
            let text = format!("{read}\n{head}\n{listed}\n{delimited}");
            assert!(!text.contains("SECRET"), "no byte of the file: {text}");
            assert!(
                text.contains("outside the cluster's allowed roots"),
                "{text}"
            );
            let name = path.filename().unwrap();
            refusals.push(text.replace(name, "NAME"));
        }
        assert_eq!(
            refusals[0], refusals[1],
            "an existing and a missing path outside the roots are refused in the same words"
        );
        let whole_store = store.list(None).try_collect::<Vec<_>>().await.unwrap_err();
        assert!(matches!(
            whole_store,
            object_store::Error::PermissionDenied { .. }
        ));
    }

    #[tokio::test]
    async fn a_guarded_store_refuses_writes_outside_the_roots_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("lake"), dir.path().join("other"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let store = guarded_local_store(&root);
        let target = store_path(&outside).join("planted.txt");
        let err = store.put(&target, b"x".to_vec().into()).await.unwrap_err();
        assert!(
            matches!(err, object_store::Error::PermissionDenied { .. }),
            "{err}"
        );
        assert!(!outside.join("planted.txt").exists());
        store
            .put(&store_path(&root).join("ok.txt"), b"x".to_vec().into())
            .await
            .unwrap();
        assert!(
            root.join("ok.txt").exists(),
            "a write inside the root lands"
        );
    }
}
