//! `LakeClient` end to end: INSERT with file uploads, visibility through the table
//! version, no I/O for refused statements, concurrency, and garbage collection.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use arrow::array::{Array, Int64Array, StructArray};
use oxidelake_objects::{GcPolicy, from_array};
use oxidelake_sdk::{FileUpload, InsertValue, LakeClient, SdkError};

#[path = "sdk/hardening.rs"]
mod hardening;
#[path = "common/lake.rs"]
mod lake;
#[path = "sdk/properties.rs"]
mod properties;

use lake::{INSERT, bytes, client_with_table};

fn object_files(client: &LakeClient) -> usize {
    fn count(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| {
                        if e.path().is_dir() {
                            count(&e.path())
                        } else {
                            1
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    count(&client.objects().root().join("sha256")) + count(&client.objects().root().join(".tmp"))
}

async fn version(client: &LakeClient) -> i64 {
    client
        .catalog()
        .version(&"robots.episodes".parse().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn insert_sql_file_uploads_and_queries_datalocation() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    let payload = bytes(3 * 1024 * 1024 + 17, 9);
    let file = dir.path().join("ep42.mcap");
    std::fs::write(&file, &payload).unwrap();

    let outcome = client
        .execute(
            INSERT,
            vec![
                InsertValue::Int64(42),
                InsertValue::File(FileUpload::from_path(&file)),
            ],
        )
        .await
        .unwrap();
    assert_eq!(outcome.version, 1);

    let batches = client
        .sql("SELECT id, episode FROM robots.episodes")
        .await
        .unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    let batch = &batches[0];
    let id = batch
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(id.value(0), 42);
    let episode = batch
        .column(1)
        .as_any()
        .downcast_ref::<StructArray>()
        .unwrap();
    let location = from_array(episode).unwrap().remove(0).unwrap();
    assert_eq!(location, outcome.locations[0]);
    assert_eq!(location.size(), payload.len() as u64);
    let mut read_back = Vec::new();
    client
        .open_object(&location)
        .unwrap()
        .read_to_end(&mut read_back)
        .unwrap();
    assert_eq!(read_back, payload);
    // The location's columns are plain SQL, too.
    let sized = client
        .sql("SELECT episode['size'] AS size, episode['mime'] AS mime FROM robots.episodes")
        .await
        .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&sized)
        .unwrap()
        .to_string();
    assert!(
        text.contains(&payload.len().to_string()) && text.contains("application/x-mcap"),
        "{text}"
    );
}

#[tokio::test]
async fn failed_upload_does_not_publish_a_table_version() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    let missing = dir.path().join("never-written.mcap");
    let err = client
        .execute(
            INSERT,
            vec![
                InsertValue::Int64(1),
                InsertValue::File(FileUpload::from_path(&missing)),
            ],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SdkError::Object(_)), "{err}");
    assert_eq!(version(&client).await, 0);
    assert_eq!(object_files(&client), 0);
    let rows = client
        .sql("SELECT count(*) AS n FROM robots.episodes")
        .await
        .unwrap();
    let n = rows[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn unsupported_insert_syntax_never_starts_an_upload() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    let file = dir.path().join("ep.bin");
    std::fs::write(&file, bytes(1000, 1)).unwrap();
    let upload = || InsertValue::File(FileUpload::from_path(&file));
    let refused: Vec<(&str, Vec<InsertValue>)> = vec![
        (
            "INSERT INTO robots.episodes (id, episode) VALUES (?, 'x')",
            vec![InsertValue::Int64(1), upload()],
        ),
        (
            "INSERT INTO episodes (id, episode) VALUES (?, ?)",
            vec![InsertValue::Int64(1), upload()],
        ),
        (
            "INSERT INTO robots.episodes (id, episode) SELECT 1, 2",
            vec![InsertValue::Int64(1), upload()],
        ),
        // Grammar fine, but checked against the schema before any file is opened:
        (
            "INSERT INTO robots.episodes (id, episode) VALUES (?, ?)",
            vec![upload(), upload()],
        ),
        (
            "INSERT INTO robots.episodes (id, nope) VALUES (?, ?)",
            vec![InsertValue::Int64(1), upload()],
        ),
        (
            "INSERT INTO robots.episodes (note, episode) VALUES (?, ?)",
            vec![InsertValue::Utf8("x".into()), upload()],
        ),
        (
            "INSERT INTO robots.episodes (id, episode) VALUES (?, ?)",
            vec![InsertValue::Int64(1)],
        ),
    ];
    for (sql, params) in refused {
        let err = client.execute(sql, params).await.unwrap_err();
        assert!(
            !matches!(err, SdkError::Object(_) | SdkError::Catalog(_)),
            "{sql}: {err}"
        );
        assert_eq!(object_files(&client), 0, "{sql} started an upload");
        assert_eq!(version(&client).await, 0, "{sql} published a version");
    }
}

#[tokio::test]
async fn orphaned_uploads_are_collected_and_referenced_objects_never_are() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    let kept = dir.path().join("kept.bin");
    std::fs::write(&kept, bytes(5000, 2)).unwrap();
    let outcome = client
        .execute(
            INSERT,
            vec![
                InsertValue::Int64(1),
                InsertValue::File(FileUpload::from_path(&kept)),
            ],
        )
        .await
        .unwrap();
    // An upload whose commit never happened (as after a crash between the two).
    let orphan_source = dir.path().join("orphan.bin");
    std::fs::write(&orphan_source, bytes(7000, 3)).unwrap();
    let orphan = client.objects().put_file(&orphan_source, None).unwrap();

    let report = client
        .gc(GcPolicy::new(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(
        (report.deleted, report.referenced, report.too_young),
        (0, 1, 1)
    );
    let report = client
        .gc(GcPolicy::new(Duration::ZERO).allow_below_floor())
        .await
        .unwrap();
    assert_eq!((report.deleted, report.referenced), (1, 1));
    assert!(client.objects().verify(&outcome.locations[0]).is_ok());
    assert!(client.objects().verify(&orphan).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_writers_insert_200_rows_with_verified_objects() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    let mut tasks = Vec::new();
    for writer in 0..8i64 {
        let client = client.clone();
        let dir = dir.path().to_path_buf();
        tasks.push(tokio::spawn(async move {
            for i in 0..25i64 {
                let id = writer * 100 + i;
                let file = dir.join(format!("w{writer}-{i}.bin"));
                std::fs::write(&file, bytes(2048 + id as usize, id as u8)).unwrap();
                client
                    .execute(
                        INSERT,
                        vec![
                            InsertValue::Int64(id),
                            InsertValue::File(FileUpload::from_path(&file)),
                        ],
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(version(&client).await, 200);
    let batches = client
        .sql("SELECT id, episode FROM robots.episodes")
        .await
        .unwrap();
    let mut ids = Vec::new();
    for batch in &batches {
        let id = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let episode = batch
            .column(1)
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        for (row, location) in from_array(episode).unwrap().into_iter().enumerate() {
            let location = location.unwrap();
            client.objects().verify(&location).unwrap();
            assert_eq!(location.size(), 2048 + id.value(row) as u64);
            ids.push(id.value(row));
        }
    }
    ids.sort_unstable();
    let expected: Vec<i64> = (0..8)
        .flat_map(|w| (0..25).map(move |i| w * 100 + i))
        .collect();
    assert_eq!(ids, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_session_reads_the_pinned_snapshot_files() {
    use oxidelake_catalog::{TableName, register_snapshot};
    use oxidelake_runtime::OxideSession;
    use oxidelake_runtime::cluster::InProcessCluster;

    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    for id in 0..3 {
        let file = dir.path().join(format!("e{id}.bin"));
        std::fs::write(&file, bytes(1000 + id as usize, id as u8)).unwrap();
        client
            .execute(
                INSERT,
                vec![
                    InsertValue::Int64(id),
                    InsertValue::File(FileUpload::from_path(&file)),
                ],
            )
            .await
            .unwrap();
    }
    let name: TableName = "robots.episodes".parse().unwrap();
    let snapshot = client.catalog().snapshot(&name, None).await.unwrap();
    // A write after the snapshot was taken is not part of it.
    let late = dir.path().join("late.bin");
    std::fs::write(&late, bytes(10, 9)).unwrap();
    client
        .execute(
            INSERT,
            vec![
                InsertValue::Int64(99),
                InsertValue::File(FileUpload::from_path(&late)),
            ],
        )
        .await
        .unwrap();

    let cluster = InProcessCluster::start(1, 2, oxidelake_core::BackendKind::CpuSimd)
        .await
        .unwrap();
    let remote = OxideSession::connect(&cluster.url()).await.unwrap();
    register_snapshot(remote.context(), "robots.episodes", &snapshot).unwrap();
    let batches = tokio::time::timeout(
        Duration::from_secs(120),
        remote.sql("SELECT id, episode['size'] AS size FROM robots.episodes ORDER BY id"),
    )
    .await
    .unwrap()
    .unwrap();
    let ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(ids, vec![0, 1, 2]);
    drop(remote);
    cluster.shutdown();
}
