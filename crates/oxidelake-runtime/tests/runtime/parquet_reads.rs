//! Parquet reads of a session: files reached through symlinks register like any other,
//! and a file whose footer length cannot be right is a typed error on every path, not a
//! panic in the Parquet decoder.

use oxidelake_runtime::cli::tables::register_data_dir;
use oxidelake_runtime::{EngineError, OxideSession};

use super::data::{sorted_rows, write_lake};

const SUMMARY: &str = "SELECT count(*) AS n, sum(a) AS s, min(b) AS b FROM";

#[cfg(unix)]
#[tokio::test]
async fn parquet_files_reached_through_symlinks_register_with_data_and_read_every_row() {
    let source = tempfile::tempdir().unwrap();
    let tables = write_lake(source.path());
    let (_, t_dir) = tables.iter().find(|(name, _)| *name == "t").unwrap();
    // A --data folder whose table directory holds links to the real files.
    let lake = tempfile::tempdir().unwrap();
    let linked = lake.path().join("t");
    std::fs::create_dir(&linked).unwrap();
    for entry in std::fs::read_dir(source.path().join("t")).unwrap() {
        let target = entry.unwrap().path();
        std::os::unix::fs::symlink(&target, linked.join(target.file_name().unwrap())).unwrap();
    }

    let session = OxideSession::local();
    let registered = register_data_dir(&session, lake.path()).await.unwrap();
    assert_eq!(registered, vec!["t".to_string()]);
    session.register_parquet("original", t_dir).await.unwrap();
    let through_links = session.sql(&format!("{SUMMARY} t")).await.unwrap();
    let original = session.sql(&format!("{SUMMARY} original")).await.unwrap();
    assert_eq!(sorted_rows(&through_links), sorted_rows(&original));
    assert!(
        sorted_rows(&through_links)[0].starts_with("6501|"),
        "{:?}",
        sorted_rows(&through_links)
    );
}

#[tokio::test]
async fn create_external_table_over_parquet_with_an_impossible_footer_length_is_a_format_error() {
    let dir = tempfile::tempdir().unwrap();
    write_lake(dir.path());
    let mut bytes = std::fs::read(dir.path().join("d").join("part-0.parquet")).unwrap();
    let n = bytes.len();
    // The trailer announces four times the file's length of footer metadata.
    bytes[n - 8..n - 4].copy_from_slice(&(n as u32 * 4).to_le_bytes());
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, bytes).unwrap();

    let session = OxideSession::local();
    let err = session
        .sql(&format!(
            "CREATE EXTERNAL TABLE bad STORED AS PARQUET LOCATION '{}'",
            bad.display()
        ))
        .await
        .unwrap_err();
    match &err {
        EngineError::Format { path, detail, .. } => {
            assert!(path.ends_with("bad.parquet"), "{err}");
            assert!(detail.contains("does not fit"), "{err}");
        }
        other => panic!("expected EngineError::Format, got {other:?}"),
    }
}
