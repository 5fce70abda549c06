//! Where tables live on disk: data directories with glob characters in their path,
//! symbolic links, and table directories that a create left without a commit.

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use datafusion::prelude::SessionContext;
use oxidelake_catalog::{Catalog, CatalogError, TableName, read_batches, register_snapshot};

use super::support::{batch, catalog_with_episodes, episodes, ids, schema, sorted_by_id};

/// The catalog's `tables/` directory (canonical, as the catalog uses it).
#[cfg(unix)]
fn tables_dir(catalog: &Catalog) -> std::path::PathBuf {
    let table_dir = catalog.table_dir(&episodes());
    table_dir.parent().unwrap().parent().unwrap().to_path_buf()
}

async fn sorted_ids(catalog: &Catalog, name: &TableName) -> Vec<i64> {
    let snapshot = catalog.snapshot(name, None).await.unwrap();
    ids(&sorted_by_id(
        &read_batches(&snapshot).await.unwrap(),
        &snapshot.schema,
    ))
}

#[tokio::test]
async fn a_data_dir_with_glob_characters_in_its_path_reads_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path().join("lake[1]?*")).unwrap();
    catalog.create_table(&episodes(), schema()).await.unwrap();
    catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
    catalog.append(&episodes(), batch(3..5), 1).await.unwrap();

    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(snapshot.files.len(), 2);
    assert_eq!(sorted_ids(&catalog, &episodes()).await, vec![0, 1, 2, 3, 4]);

    let ctx = SessionContext::new();
    register_snapshot(&ctx, "robots.episodes", &snapshot).unwrap();
    let counted = ctx
        .sql("SELECT count(*), sum(id) FROM robots.episodes")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let count = counted[0].column(0).as_primitive::<Int64Type>().value(0);
    let sum = counted[0].column(1).as_primitive::<Int64Type>().value(0);
    assert_eq!((count, sum), (5, 10), "SQL sees every row too");
}

#[cfg(unix)]
#[tokio::test]
async fn a_namespace_directory_that_is_a_symlink_is_listed_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let catalog = Catalog::open(dir.path().join("lake")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, tables_dir(&catalog).join("robots")).unwrap();

    catalog.create_table(&episodes(), schema()).await.unwrap();
    assert_eq!(
        catalog.append(&episodes(), batch(0..4), 0).await.unwrap(),
        1
    );
    assert!(
        elsewhere.join("episodes").join("_delta_log").is_dir(),
        "the table lives behind the link"
    );

    assert_eq!(catalog.list_tables().unwrap(), vec![episodes()]);
    assert_eq!(sorted_ids(&catalog, &episodes()).await, vec![0, 1, 2, 3]);
}

#[cfg(unix)]
#[tokio::test]
async fn a_table_directory_that_is_a_symlink_is_listed_and_read() {
    let (dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
    let table_dir = catalog.table_dir(&episodes());
    let moved = dir.path().join("moved-episodes");
    std::fs::rename(&table_dir, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &table_dir).unwrap();

    assert_eq!(catalog.list_tables().unwrap(), vec![episodes()]);
    assert_eq!(sorted_ids(&catalog, &episodes()).await, vec![0, 1, 2]);
    assert_eq!(
        catalog.append(&episodes(), batch(3..4), 1).await.unwrap(),
        2
    );
    assert_eq!(sorted_ids(&catalog, &episodes()).await, vec![0, 1, 2, 3]);
}

#[cfg(unix)]
#[tokio::test]
async fn a_dangling_symlink_among_the_tables_fails_the_listing_instead_of_hiding_a_table() {
    let (dir, catalog) = catalog_with_episodes().await;
    let namespace_link = tables_dir(&catalog).join("lost");
    std::os::unix::fs::symlink(dir.path().join("unmounted"), &namespace_link).unwrap();
    let err = catalog.list_tables().unwrap_err();
    assert!(
        matches!(&err, CatalogError::Io { path, .. } if *path == namespace_link),
        "{err}"
    );

    std::fs::remove_file(&namespace_link).unwrap();
    let table_link = tables_dir(&catalog).join("robots").join("gone");
    std::os::unix::fs::symlink(dir.path().join("unmounted"), &table_link).unwrap();
    let err = catalog.list_tables().unwrap_err();
    assert!(
        matches!(&err, CatalogError::Io { path, .. } if *path == table_link),
        "{err}"
    );
}

#[tokio::test]
async fn a_table_whose_create_never_committed_is_skipped_and_breaks_no_other_table() {
    let (_dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..2), 0).await.unwrap();
    // A create interrupted before version 0's commit landed: the log directory exists,
    // holding at most a staged commit that was never linked into place.
    let half: TableName = "robots.half".parse().unwrap();
    let log_dir = catalog.table_dir(&half).join("_delta_log");
    std::fs::create_dir_all(&log_dir).unwrap();
    std::fs::write(log_dir.join("_commit_4f1c.json.tmp"), b"{\"commitInfo\":{").unwrap();

    assert_eq!(catalog.list_tables().unwrap(), vec![episodes()]);
    assert_eq!(sorted_ids(&catalog, &episodes()).await, vec![0, 1]);
    for err in [
        catalog.snapshot(&half, None).await.unwrap_err(),
        catalog.version(&half).await.unwrap_err(),
    ] {
        assert!(matches!(err, CatalogError::TableNotFound { .. }), "{err}");
    }

    // The name can be created afresh, and then it is a table like any other.
    catalog.create_table(&half, schema()).await.unwrap();
    assert_eq!(
        catalog.list_tables().unwrap(),
        vec![episodes(), half.clone()]
    );
    assert_eq!(catalog.append(&half, batch(7..8), 0).await.unwrap(), 1);
    assert_eq!(sorted_ids(&catalog, &half).await, vec![7]);
}
