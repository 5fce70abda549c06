use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use oxidelake_catalog::{CatalogError, read_batches};

use super::support::{batch, catalog_with_episodes, episodes, ids, schema, sorted_by_id};

#[tokio::test]
async fn a_snapshot_at_an_older_version_shows_the_older_rows() {
    let (_dir, catalog) = catalog_with_episodes().await;
    assert_eq!(
        catalog.append(&episodes(), batch(0..3), 0).await.unwrap(),
        1
    );
    assert_eq!(
        catalog.append(&episodes(), batch(3..5), 1).await.unwrap(),
        2
    );

    let v0 = catalog.snapshot(&episodes(), Some(0)).await.unwrap();
    assert_eq!((v0.version, v0.files.len()), (0, 0));
    assert_eq!(v0.count_rows().await.unwrap(), 0);

    let v1 = catalog.snapshot(&episodes(), Some(1)).await.unwrap();
    assert_eq!((v1.version, v1.files.len()), (1, 1));
    let rows = sorted_by_id(&read_batches(&v1).await.unwrap(), &v1.schema);
    assert_eq!(ids(&rows), vec![0, 1, 2]);

    let latest = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!((latest.version, latest.files.len()), (2, 2));
    assert!(
        latest
            .files
            .iter()
            .all(|f| f.path.exists() && f.size_bytes > 0)
    );
    assert!(latest.files.contains(&v1.files[0]), "files are immutable");
    let rows = sorted_by_id(&read_batches(&latest).await.unwrap(), &latest.schema);
    assert_eq!(ids(&rows), vec![0, 1, 2, 3, 4]);

    for missing in [3, -1] {
        let err = catalog
            .snapshot(&episodes(), Some(missing))
            .await
            .unwrap_err();
        assert!(
            matches!(err, CatalogError::VersionNotFound { version, latest: 2, .. } if version == missing),
            "{err}"
        );
    }
}

#[tokio::test]
async fn struct_file_columns_round_trip_through_delta() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let written = batch(0..12);
    catalog
        .append(&episodes(), written.clone(), 0)
        .await
        .unwrap();

    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(
        snapshot.schema,
        schema(),
        "struct type and nullability kept"
    );
    let read = sorted_by_id(&read_batches(&snapshot).await.unwrap(), &snapshot.schema);
    let file = read.column(2).as_struct();
    assert_eq!(file, written.column(2).as_struct());
    // Spot checks that do not rely on StructArray equality alone.
    assert!(file.is_null(0) && file.is_null(3) && file.is_valid(1));
    assert_eq!(
        file.column_by_name("uri")
            .unwrap()
            .as_string::<i32>()
            .value(1),
        "file:///data/objects/1.mcap"
    );
    assert_eq!(
        file.column_by_name("size")
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(5),
        1_005
    );
    let mime = file.column_by_name("mime").unwrap();
    assert!(mime.is_null(4) && mime.is_valid(5));
}
