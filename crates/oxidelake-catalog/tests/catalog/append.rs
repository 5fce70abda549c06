use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use oxidelake_catalog::{Catalog, CatalogError, TableName, read_batches};

use super::support::{
    batch, catalog_with_episodes, entries, episodes, parquet_files, schema, sorted_by_id,
};

#[tokio::test]
async fn a_created_table_reads_back_the_appended_rows_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    let info = catalog.create_table(&episodes(), schema()).await.unwrap();
    assert_eq!(info.version, 0);
    assert_eq!(info.schema, schema());
    assert!(info.location.ends_with("tables/robots/episodes"));
    assert_eq!(catalog.version(&episodes()).await.unwrap(), 0);

    let written = batch(0..10);
    let version = catalog
        .append(&episodes(), written.clone(), 0)
        .await
        .unwrap();
    assert_eq!(version, 1);
    assert_eq!(catalog.version(&episodes()).await.unwrap(), 1);
    assert_eq!(catalog.schema(&episodes()).await.unwrap(), schema());

    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(snapshot.version, 1);
    let read = read_batches(&snapshot).await.unwrap();
    assert_eq!(sorted_by_id(&read, &snapshot.schema), written);
}

#[tokio::test]
async fn a_stale_expected_version_is_a_conflict_and_publishes_nothing() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let table_dir = catalog.table_dir(&episodes());
    let log_dir = table_dir.join("_delta_log");
    assert_eq!(
        catalog.append(&episodes(), batch(0..3), 0).await.unwrap(),
        1
    );
    let log_entries = entries(&log_dir);
    let data_files = parquet_files(&table_dir);

    for stale in [0, 2, -1] {
        let err = catalog
            .append(&episodes(), batch(3..6), stale)
            .await
            .unwrap_err();
        match err {
            CatalogError::VersionConflict {
                table,
                expected,
                actual,
            } => {
                assert_eq!(table, "robots.episodes");
                assert_eq!((expected, actual), (stale, 1));
            }
            other => panic!("expected a version conflict, got {other}"),
        }
    }

    assert_eq!(catalog.version(&episodes()).await.unwrap(), 1);
    assert_eq!(entries(&log_dir), log_entries, "no new commit in the log");
    assert_eq!(parquet_files(&table_dir), data_files, "no new data file");
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(snapshot.count_rows().await.unwrap(), 3);
}

#[tokio::test]
async fn creating_a_table_that_exists_is_a_typed_error() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let err = catalog
        .create_table(&episodes(), schema())
        .await
        .unwrap_err();
    assert!(matches!(err, CatalogError::TableExists { .. }), "{err}");
    assert_eq!(catalog.version(&episodes()).await.unwrap(), 0);
}

#[tokio::test]
async fn a_missing_table_is_a_typed_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    let missing: TableName = "robots.missing".parse().unwrap();
    let err = catalog.version(&missing).await.unwrap_err();
    assert!(matches!(err, CatalogError::TableNotFound { .. }), "{err}");
    let err = catalog.append(&missing, batch(0..1), 0).await.unwrap_err();
    assert!(matches!(err, CatalogError::TableNotFound { .. }), "{err}");
    assert!(!catalog.table_dir(&missing).exists());
}

#[tokio::test]
async fn a_batch_with_another_schema_is_rejected_before_anything_is_written() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let table_dir = catalog.table_dir(&episodes());
    let other = arrow::array::RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
        vec![Arc::new(arrow::array::Int64Array::from(vec![1]))],
    )
    .unwrap();
    let err = catalog.append(&episodes(), other, 0).await.unwrap_err();
    assert!(matches!(err, CatalogError::SchemaMismatch { .. }), "{err}");
    assert_eq!(catalog.version(&episodes()).await.unwrap(), 0);
    assert_eq!(parquet_files(&table_dir), 0);
}

#[tokio::test]
async fn columns_that_delta_would_change_are_rejected_at_create() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    for data_type in [DataType::UInt64, DataType::FixedSizeBinary(32)] {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("digest", data_type, false),
        ]));
        let err = catalog.create_table(&episodes(), schema).await.unwrap_err();
        assert!(
            matches!(&err, CatalogError::UnsupportedColumnType { column, .. } if column == "digest"),
            "{err}"
        );
    }
    assert!(catalog.list_tables().unwrap().is_empty());
}

#[tokio::test]
async fn list_tables_names_every_created_table_in_order() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let robots_arms: TableName = "robots.arms".parse().unwrap();
    let lab_runs: TableName = "lab.runs".parse().unwrap();
    catalog.create_table(&robots_arms, schema()).await.unwrap();
    catalog.create_table(&lab_runs, schema()).await.unwrap();
    assert_eq!(
        catalog.list_tables().unwrap(),
        vec![lab_runs, robots_arms, episodes()]
    );
}
