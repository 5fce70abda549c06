//! Making DataFusion read `file://` through the io_uring store.

use std::sync::Arc;

use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use object_store::ObjectStore;

use super::store::UringLocalFileSystem;

/// Registers a [`UringLocalFileSystem`] (no prefix) for `file://` in `env`, replacing
/// DataFusion's default `LocalFileSystem`, and returns it (e.g. to read
/// [`UringLocalFileSystem::ops_completed`]). Fails, naming the errno, where io_uring is
/// refused; `env` is then left unchanged.
pub fn register_uring_file_store(
    env: &RuntimeEnv,
) -> Result<Arc<UringLocalFileSystem>, object_store::Error> {
    let store = Arc::new(UringLocalFileSystem::new()?);
    let url = ObjectStoreUrl::local_filesystem();
    let as_dyn: Arc<dyn ObjectStore> = Arc::clone(&store) as Arc<dyn ObjectStore>;
    env.register_object_store(url.as_ref(), as_dyn);
    Ok(store)
}
