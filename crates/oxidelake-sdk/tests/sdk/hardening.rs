//! Regression tests of issue #12 through the SDK: each case a new user hit that lost or
//! misreported committed data (the cases run through `oxide objects` are in
//! `oxidelake-cli`'s tests, `cli/objects_hardening.rs`).

use oxidelake_sdk::{FileUpload, InsertValue};

use crate::lake::{age_all_objects, bytes, client_with_table, forced_zero, one_row};

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
