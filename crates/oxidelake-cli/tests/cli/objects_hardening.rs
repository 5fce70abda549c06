//! Regression tests of issue #12 through the `oxide` commands: each case a new user hit
//! that lost or misreported committed data (the cases that need no binary are in the
//! SDK's tests, `sdk/hardening.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use oxidelake_sdk::LakeClient;

use crate::lake::{INSERT, age_all_objects, forced_zero, one_row};

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

/// Issue 44: a FIFO at an object's address made `objects verify`, `objects cat` and an
/// INSERT of the same bytes wait forever, and the INSERT held the store's shared lock,
/// so `objects gc` waited behind it.
#[tokio::test]
async fn a_fifo_at_an_objects_address_fails_verify_cat_and_insert_naming_it_and_gc_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let (client, location, payload) = one_row(&data).await;
    let stored = client.objects().path_of(&location.sha256());
    std::fs::remove_file(&stored).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&stored)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", stored.display());
    let same_bytes = dir.path().join("again.bin");
    std::fs::write(&same_bytes, &payload).unwrap();

    let refused = |cmd: &mut Command| {
        let out = cmd.timeout(Duration::from_secs(60)).assert().failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            stderr.starts_with("error:")
                && stderr.contains(&stored.display().to_string())
                && stderr.contains("FIFO, not a regular file"),
            "{stderr}"
        );
    };
    refused(objects_cmd(&data).arg("verify"));
    refused(objects_cmd(&data).args(["cat", &location.sha256().to_string()]));
    refused(
        Command::new(env!("CARGO_BIN_EXE_oxide"))
            .arg("insert")
            .arg("--data-dir")
            .arg(&data)
            .args([INSERT, "2"])
            .arg(format!("@{}", same_bytes.display())),
    );
    objects_cmd(&data)
        .args(["gc", "--retention-hours", "0", "--force"])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
}
