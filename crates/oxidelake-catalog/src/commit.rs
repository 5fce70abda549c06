//! The table-version compare-and-swap: one Delta commit with no retry.
//!
//! Delta commits version N+1 by writing `_delta_log/<N+1>.json` put-if-absent (on a local
//! filesystem, `link(2)` of a staged file, which never overwrites). With
//! `max_retries = 0` delta-rs neither rebases onto a newer version nor retries a lost
//! put: if the table moved past the snapshot the commit was prepared on, or another writer
//! linked N+1 first, the commit fails with `MaxCommitAttempts(0)` and nothing is
//! published. That failure is the version conflict.

use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake_core::kernel::{Action, Add, Version};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableError};

/// How a compare-and-swap commit ended (other failures are errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitOutcome {
    /// The commit of this version landed: its rows are visible from now on.
    Landed(Version),
    /// Another writer committed first; nothing was published.
    LostRace,
}

/// Commits `adds` as a blind append on exactly the version `table` is loaded at.
///
/// Once the log entry is written the outcome is [`CommitOutcome::Landed`] even if
/// delta-rs's post-commit work (snapshot refresh, a checkpoint every 10 versions) fails:
/// that failure is logged, because the rows are already visible and reporting an error
/// would make a caller retry and append them twice.
pub(crate) async fn commit_append_cas(
    table: &DeltaTable,
    adds: Vec<Add>,
) -> Result<CommitOutcome, DeltaTableError> {
    let operation = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    };
    let properties = CommitProperties::default()
        .with_max_retries(0)
        // Expired-log cleanup lists the whole log on every commit; it belongs to
        // maintenance, not to each append.
        .with_cleanup_expired_logs(Some(false));
    let prepared = CommitBuilder::from(properties)
        .with_actions(adds.into_iter().map(Action::Add).collect())
        .build(Some(table.snapshot()?), table.log_store(), operation)
        .into_prepared_commit_future()
        .await?;
    let post_commit = match prepared.await {
        Ok(post_commit) => post_commit,
        Err(e) if is_lost_race(&e) => return Ok(CommitOutcome::LostRace),
        Err(e) => return Err(e),
    };
    let version = post_commit.version;
    if let Err(e) = post_commit.await {
        tracing::warn!(version, error = %e, "commit landed; post-commit work failed");
    }
    Ok(CommitOutcome::Landed(version))
}

/// Whether `err` is delta-rs's answer to a lost put-if-absent race with no retries left.
pub(crate) fn is_lost_race(err: &DeltaTableError) -> bool {
    matches!(
        err,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
                    | TransactionError::VersionAlreadyExists(_)
            }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_writer::write_data_files;
    use crate::{Catalog, TableName};
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn one_row(id: i64) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(Int64Array::from(vec![id]))]).unwrap()
    }

    #[tokio::test]
    async fn a_commit_prepared_on_a_version_that_moved_on_loses_and_lands_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path()).unwrap();
        let name: TableName = "t.cas".parse().unwrap();
        catalog
            .create_table(&name, one_row(0).schema())
            .await
            .unwrap();
        // A writer loads version 0 and writes its data file ...
        let stale = catalog.open_delta(&name, None).await.unwrap();
        let adds = write_data_files(&name, &stale, &catalog.table_dir(&name), one_row(1))
            .await
            .unwrap();
        // ... while another one commits version 1 first.
        assert_eq!(catalog.append(&name, one_row(2), 0).await.unwrap(), 1);

        let outcome = commit_append_cas(&stale, adds.clone()).await.unwrap();
        assert_eq!(outcome, CommitOutcome::LostRace);
        assert_eq!(catalog.version(&name).await.unwrap(), 1);

        // The same files commit once the writer is on the current version.
        let current = catalog.open_delta(&name, None).await.unwrap();
        let outcome = commit_append_cas(&current, adds).await.unwrap();
        assert_eq!(outcome, CommitOutcome::Landed(2));
        let snapshot = catalog.snapshot(&name, None).await.unwrap();
        assert_eq!(snapshot.count_rows().await.unwrap(), 2);
    }
}
