//! Regression tests of issue #12 through the SDK and the `oxide` commands: each case a
//! new user hit that lost or misreported committed data.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use oxidelake_objects::GcPolicy;
use oxidelake_sdk::{FileUpload, InsertValue, LakeClient};

use crate::lake::{INSERT, bytes, client_with_table};

/// A client with one committed row whose episode is a 20 kB file; returns the client,
/// the row's object digest and the object's bytes.
async fn one_row(data: &Path) -> (LakeClient, oxidelake_objects::DataLocation, Vec<u8>) {
    let client = client_with_table(data).await;
    let payload = bytes(20_000, 7);
    let file = data.with_extension("payload.bin");
    std::fs::write(&file, &payload).unwrap();
    let outcome = client
        .execute(
            INSERT,
            vec![
                InsertValue::Int64(1),
                InsertValue::File(FileUpload::from_path(&file)),
            ],
        )
        .await
        .unwrap();
    (client, outcome.locations[0].clone(), payload)
}

/// Everything older than the window, as if a day had passed.
fn age_all_objects(client: &LakeClient) {
    fn walk(dir: &Path) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path);
            } else {
                std::fs::File::open(&path)
                    .unwrap()
                    .set_modified(std::time::SystemTime::now() - Duration::from_secs(86_400 * 2))
                    .unwrap();
            }
        }
    }
    walk(&client.objects().root().join("sha256"));
}

fn forced_zero() -> GcPolicy {
    GcPolicy::new(Duration::ZERO).allow_below_floor()
}

fn objects_cmd(data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_oxide"));
    cmd.arg("objects");
    cmd.arg("--data-dir").arg(data);
    cmd
}

#[tokio::test]
async fn a_data_dir_with_glob_characters_reads_verifies_and_keeps_its_objects() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake[1]?*");
    let (client, location, _) = one_row(&data).await;
    let rows = client.sql("SELECT id FROM robots.episodes").await.unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    assert!(
        client
            .referenced_objects()
            .await
            .unwrap()
            .contains(&location.sha256())
    );
    age_all_objects(&client);
    let report = client.gc(forced_zero()).await.unwrap();
    assert_eq!((report.deleted, report.referenced), (0, 1));
    client.objects().verify(&location).unwrap();
    objects_cmd(&data)
        .arg("verify")
        .assert()
        .success()
        .stdout("1 referenced objects verified\n");
}

fn data_files(table_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(table_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect()
}

#[tokio::test]
async fn a_missing_committed_data_file_fails_reads_verify_and_gc_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let (client, location, _) = one_row(&data).await;
    let table_dir = data.join("tables/robots/episodes");
    for file in data_files(&table_dir) {
        std::fs::remove_file(file).unwrap();
    }
    age_all_objects(&client);
    assert!(client.sql("SELECT id FROM robots.episodes").await.is_err());
    assert!(client.referenced_objects().await.is_err());
    assert!(client.gc(forced_zero()).await.is_err());
    client.objects().verify(&location).unwrap();
    let out = objects_cmd(&data).arg("verify").assert().failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.starts_with("error:"), "{stderr}");
}

#[tokio::test]
async fn a_symlinked_namespace_is_listed_verified_and_its_objects_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(data.join("tables")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, data.join("tables/robots")).unwrap();
    let (client, location, _) = one_row(&data).await;
    let names = client.catalog().list_tables().unwrap();
    assert_eq!(names.len(), 1, "{names:?}");
    age_all_objects(&client);
    let report = client.gc(forced_zero()).await.unwrap();
    assert_eq!((report.deleted, report.referenced), (0, 1));
    client.objects().verify(&location).unwrap();
}

#[tokio::test]
async fn a_half_created_table_does_not_break_the_other_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let (client, location, _) = one_row(&data).await;
    std::fs::create_dir_all(data.join("tables/robots/half/_delta_log")).unwrap();
    let rows = client.sql("SELECT id FROM robots.episodes").await.unwrap();
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    age_all_objects(&client);
    assert_eq!(client.gc(forced_zero()).await.unwrap().referenced, 1);
    client.objects().verify(&location).unwrap();
}

#[test]
fn gc_refuses_retention_that_is_not_a_finite_number_of_hours_or_is_below_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    LakeClient::open(dir.path()).unwrap();
    for bad in ["inf", "1e300", "NaN", "-1", "-0.1", "0", "0.5"] {
        let out = objects_cmd(dir.path())
            .args(["gc", "--retention-hours", bad])
            .assert()
            .failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(!stderr.contains("panicked"), "{bad}: {stderr}");
    }
    objects_cmd(dir.path())
        .args(["gc", "--retention-hours", "0", "--force"])
        .assert()
        .success();
    objects_cmd(dir.path())
        .args(["gc", "--retention-hours", "1"])
        .assert()
        .success();
}

#[tokio::test]
async fn cat_of_a_tampered_object_writes_nothing_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let (client, location, payload) = one_row(&data).await;
    let stored = client.objects().path_of(&location.sha256());
    let mut perms = std::fs::metadata(&stored).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&stored, perms).unwrap();
    let mut damaged = payload.clone();
    damaged[19_000] ^= 1;
    std::fs::write(&stored, &damaged).unwrap();
    let out = objects_cmd(&data)
        .args(["cat", &location.sha256().to_string()])
        .assert()
        .failure();
    assert!(out.get_output().stdout.is_empty());
    // The streaming mode writes and then fails: its output is marked unverified.
    let out = objects_cmd(&data)
        .args(["cat", "--stream", &location.sha256().to_string()])
        .assert()
        .failure();
    assert_eq!(out.get_output().stdout.len(), damaged.len());
}

#[tokio::test]
async fn a_moved_lake_opens_and_verifies_its_rows_objects() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let (_client, location, payload) = one_row(&data).await;
    let moved = dir.path().join("moved lake");
    std::fs::rename(&data, &moved).unwrap();
    let client = LakeClient::open_existing(&moved).unwrap();
    let rows = client
        .sql("SELECT episode FROM robots.episodes")
        .await
        .unwrap();
    let column = rows[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::StructArray>()
        .unwrap();
    let stored = oxidelake_objects::from_array(column)
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(stored, location);
    assert_eq!(client.objects().read_verified(&stored).unwrap(), payload);
    objects_cmd(&moved).arg("verify").assert().success();
}

#[test]
fn a_mistyped_data_dir_is_an_error_for_every_reading_command() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-lake");
    for args in [vec!["verify"], vec!["gc"], vec!["cat", "ab"]] {
        let out = objects_cmd(&missing).args(&args).assert().failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            stderr.contains("not an OxideLake data directory"),
            "{args:?}: {stderr}"
        );
    }
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .arg("table")
        .arg("--data-dir")
        .arg(&missing)
        .arg("list")
        .assert()
        .failure();
    assert!(!missing.exists(), "a reading command created the data dir");
}

#[tokio::test]
async fn an_insert_with_upper_case_names_resolves_them_as_datafusion_does() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_with_table(dir.path()).await;
    let file = dir.path().join("ep.bin");
    std::fs::write(&file, bytes(1_000, 3)).unwrap();
    // Unquoted names fold to lower case: ID is column id, Robots.Episodes the table.
    client
        .execute(
            "INSERT INTO Robots.Episodes (ID, EPISODE) VALUES (?, ?)",
            vec![
                InsertValue::Int64(7),
                InsertValue::File(FileUpload::from_path(&file)),
            ],
        )
        .await
        .unwrap();
    let batches = client.sql("SELECT id FROM robots.episodes").await.unwrap();
    let ids: Vec<String> = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(ids.iter().any(|l| l.contains("| 7  |")), "{ids:?}");
    // A quoted name keeps its case, and there is no column "ID".
    let refused = client
        .execute(
            "INSERT INTO robots.episodes (\"ID\", episode) VALUES (?, ?)",
            vec![
                InsertValue::Int64(8),
                InsertValue::File(FileUpload::from_path(&file)),
            ],
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
}
