//! `read_columns`: some columns of every row of a snapshot, as a stream.

use arrow::array::AsArray;
use datafusion::physical_plan::common::collect;
use oxidelake_catalog::{CatalogError, read_columns};

use super::support::{batch, catalog_with_episodes, episodes, ids, sorted_by_id};

#[tokio::test]
async fn read_columns_streams_only_the_named_columns_of_every_row() {
    let (_dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..4), 0).await.unwrap();
    catalog.append(&episodes(), batch(4..10), 1).await.unwrap();
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();

    let stream = read_columns(&snapshot, &["id", "file"]).await.unwrap();
    let schema = stream.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["id", "file"],
        "only the named columns, in that order"
    );
    let batches = collect(stream).await.unwrap();
    assert!(batches.iter().all(|b| b.schema() == schema));

    let rows = sorted_by_id(&batches, &schema);
    assert_eq!(ids(&rows), (0..10).collect::<Vec<_>>(), "every row");
    let written = batch(0..10);
    assert_eq!(rows.column(1).as_struct(), written.column(2).as_struct());

    // A table with no appends streams no rows.
    let empty = catalog.snapshot(&episodes(), Some(0)).await.unwrap();
    let stream = read_columns(&empty, &["file"]).await.unwrap();
    assert_eq!(collect(stream).await.unwrap().len(), 0);
}

#[tokio::test]
async fn read_columns_rejects_unknown_and_repeated_columns() {
    let (_dir, catalog) = catalog_with_episodes().await;
    catalog.append(&episodes(), batch(0..2), 0).await.unwrap();
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();

    for (columns, bad) in [
        (&["id", "nope"][..], "nope"),
        (&["id", "name", "id"][..], "id"),
    ] {
        let Err(err) = read_columns(&snapshot, columns).await else {
            panic!("{columns:?} was read");
        };
        assert!(
            matches!(&err, CatalogError::InvalidProjection { column, .. } if column == bad),
            "{columns:?}: {err}"
        );
    }
}
