//! `Session`: where DataFrames come from.

use datafusion::prelude::ParquetReadOptions;
use oxidelake_runtime::OxideSession;

use crate::{DataFrame, Result};

/// A query session, embedded or connected to a cluster: the entry point of the API.
#[derive(Debug, Clone)]
pub struct Session {
    inner: OxideSession,
}

impl From<OxideSession> for Session {
    /// Wraps a session built with its own placement target or detector
    /// (`OxideSession::local_with`).
    fn from(inner: OxideSession) -> Self {
        Self { inner }
    }
}

impl Session {
    /// An embedded session, placing plans for the local hardware.
    pub fn local() -> Self {
        OxideSession::local().into()
    }

    /// Connects to the Ballista scheduler at `url` (`df://host:port`).
    pub async fn connect(url: &str) -> Result<Self> {
        Ok(OxideSession::connect(url).await?.into())
    }

    /// The underlying `OxideSession` (SQL with placement-aware `EXPLAIN`, the
    /// DataFusion context).
    pub fn oxide(&self) -> &OxideSession {
        &self.inner
    }

    /// A DataFrame over the Parquet file or directory at `path`.
    pub async fn read_parquet(&self, path: &str) -> Result<DataFrame> {
        let frame = self
            .inner
            .context()
            .read_parquet(path, ParquetReadOptions::default())
            .await?;
        Ok(DataFrame::new(self.inner.clone(), frame))
    }

    /// Registers the Parquet file or directory at `path` as table `name`.
    pub async fn register_parquet(&self, name: &str, path: &str) -> Result<()> {
        self.inner.register_parquet(name, path).await
    }

    /// The query `sql` as a DataFrame, not yet run. Statements with effects (`SET`,
    /// `CREATE ...`) take effect here, as in DataFusion. `EXPLAIN` here is DataFusion's;
    /// [`DataFrame::explain`] (or `OxideSession::sql`) adds the placement tags. A
    /// statement nested deeper than [`oxidelake_runtime::MAX_STATEMENT_DEPTH`] is
    /// refused before it is parsed.
    pub async fn sql(&self, sql: &str) -> Result<DataFrame> {
        self.inner.check_statement_depth(sql)?;
        let frame = self.inner.context().sql(sql).await?;
        Ok(DataFrame::new(self.inner.clone(), frame))
    }

    /// The registered table `name` as a DataFrame.
    pub async fn table(&self, name: &str) -> Result<DataFrame> {
        let frame = self.inner.context().table(name).await?;
        Ok(DataFrame::new(self.inner.clone(), frame))
    }
}
