//! Damaged storage is an error, never fewer rows: missing or truncated data files, and
//! corrupt Delta log entries.

use datafusion::prelude::SessionContext;
use oxidelake_catalog::{
    CatalogError, Snapshot, read_batches, read_columns, register_snapshot, snapshot_table_provider,
};

use super::support::{batch, catalog_with_episodes, episodes};

/// The error of every way of reading `snapshot`: collecting, counting, streaming some
/// columns, building its provider and registering it for SQL.
async fn every_read_error(snapshot: &Snapshot) -> Vec<CatalogError> {
    let Err(streamed) = read_columns(snapshot, &["id"]).await else {
        panic!("read_columns succeeded");
    };
    let Err(provider) = snapshot_table_provider(snapshot) else {
        panic!("snapshot_table_provider succeeded");
    };
    vec![
        read_batches(snapshot).await.unwrap_err(),
        snapshot.count_rows().await.unwrap_err(),
        streamed,
        provider,
        register_snapshot(&SessionContext::new(), "robots.episodes", snapshot).unwrap_err(),
    ]
}

#[tokio::test]
async fn a_deleted_data_file_fails_every_read_of_its_version() {
    let (_dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
    catalog.append(&episodes(), batch(3..6), 1).await.unwrap();
    let v1 = catalog.snapshot(&episodes(), Some(1)).await.unwrap();
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    // The file version 2 added.
    let lost = snapshot
        .files
        .iter()
        .find(|f| !v1.files.contains(f))
        .unwrap()
        .path
        .clone();
    std::fs::remove_file(&lost).unwrap();

    // Taken before or after the loss, the snapshot lists the file and cannot be read.
    let retaken = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(retaken, snapshot);
    for err in every_read_error(&snapshot).await {
        assert!(
            matches!(&err, CatalogError::MissingDataFile { table, version: 2, path }
                if table == "robots.episodes" && *path == lost),
            "{err}"
        );
    }
    // The version before, which does not list the file, still reads.
    assert_eq!(v1.count_rows().await.unwrap(), 3);
}

#[tokio::test]
async fn a_truncated_data_file_is_a_size_mismatch_against_the_log() {
    let (_dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    let file = snapshot.files[0].clone();
    let short_bytes = file.size_bytes / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file.path)
        .unwrap()
        .set_len(short_bytes)
        .unwrap();

    for err in every_read_error(&snapshot).await {
        assert!(
            matches!(&err, CatalogError::DataFileSizeMismatch {
                version: 1, path, expected_bytes, actual_bytes, ..
            } if *path == file.path && *expected_bytes == file.size_bytes
                && *actual_bytes == short_bytes),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_corrupt_commit_file_is_a_typed_error_never_fewer_rows_or_a_panic() {
    let (_dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
    let commit = catalog
        .table_dir(&episodes())
        .join("_delta_log")
        .join("00000000000000000001.json");
    let whole = std::fs::read(&commit).unwrap();
    let first_line_end = whole
        .iter()
        .position(|&b| b == b'\n')
        .expect("a commit holds several actions, one per line");
    let last_byte = whole.iter().rposition(|&b| b != b'\n').unwrap();
    let corruptions: [(&str, Vec<u8>); 4] = [
        (
            "garbage bytes",
            b"\x00\xff\xfe\x01 not a log entry".to_vec(),
        ),
        // Everything but the last action's closing brace.
        ("truncated JSON", whole[..last_byte].to_vec()),
        // The first action whole, the second cut after a few bytes.
        (
            "cut in its second action",
            whole[..first_line_end + 6].to_vec(),
        ),
        ("empty file", Vec::new()),
    ];

    for (what, bytes) in corruptions {
        std::fs::write(&commit, &bytes).unwrap();
        let reader = catalog.clone();
        // In a task of its own, so that a panic in delta-rs becomes this message.
        let outcome = tokio::spawn(async move {
            let snapshot = reader.snapshot(&episodes(), None).await.map(|s| s.files);
            let latest = reader.version(&episodes()).await;
            (snapshot, latest)
        })
        .await;
        let (snapshot, latest) =
            outcome.unwrap_or_else(|e| panic!("{what}: reading the table panicked: {e}"));
        assert!(
            matches!(&snapshot, Err(CatalogError::CorruptLogEntry { version: 1, path, .. })
                if *path == commit),
            "{what}: snapshot gave {snapshot:?}"
        );
        assert!(
            matches!(&latest, Err(CatalogError::CorruptLogEntry { version: 1, path, .. })
                if *path == commit),
            "{what}: version gave {latest:?}"
        );
    }

    std::fs::write(&commit, &whole).unwrap();
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(
        snapshot.count_rows().await.unwrap(),
        3,
        "the whole commit reads again"
    );
}
