//! `CREATE EXTERNAL TABLE` behind the allowed roots.
//!
//! A Flight SQL client's DDL runs on the scheduler, and DataFusion's listing-table
//! factory looks at the file system as soon as it is called: `ListingTableUrl::parse`
//! asks whether a local location exists and is a directory, then the schema and the
//! partitions are inferred from the files. So the locations are checked here, as the
//! statement wrote them ([`location_of`]), before the factory is called: a location
//! outside the roots is refused in the same words whether or not anything is there.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::CreateExternalTable;

use super::FileAccess;
use super::location::location_of;

/// What a refusal calls a `CREATE EXTERNAL TABLE` location.
const TABLE_LOCATION: &str = "table location";

/// A table factory whose statements' locations are checked against the roots before
/// the factory it wraps sees them.
#[derive(Debug)]
pub(super) struct RootedTableFactory {
    inner: Arc<dyn TableProviderFactory>,
    access: Arc<FileAccess>,
}

impl RootedTableFactory {
    /// `inner` behind `access`.
    pub(super) fn new(inner: Arc<dyn TableProviderFactory>, access: Arc<FileAccess>) -> Self {
        Self { inner, access }
    }
}

#[async_trait]
impl TableProviderFactory for RootedTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        for text in &cmd.locations {
            let (store, path) = location_of(text)
                .map_err(|why| DataFusionError::Plan(format!("{TABLE_LOCATION} {text}: {why}")))?;
            self.access
                .admit(TABLE_LOCATION, &store, &path)
                .map_err(DataFusionError::Plan)?;
        }
        self.inner.create(state, cmd).await
    }
}
