use std::collections::BTreeSet;

use oxidelake_catalog::{Catalog, CatalogError, read_batches};

use super::support::{batch, catalog_with_episodes, episodes, ids, sorted_by_id};

const WRITERS: i64 = 8;
const APPENDS_PER_WRITER: i64 = 25;

/// Appends one row with id `id`, retrying on conflicts by re-reading the version; returns
/// the version it landed as and how many conflicts it met.
async fn append_with_retry(catalog: &Catalog, id: i64) -> (i64, usize) {
    let mut conflicts = 0;
    loop {
        let expected = catalog.version(&episodes()).await.unwrap();
        match catalog.append(&episodes(), batch([id]), expected).await {
            Ok(version) => {
                assert_eq!(version, expected + 1);
                return (version, conflicts);
            }
            Err(CatalogError::VersionConflict { actual, .. }) => {
                assert!(actual > expected, "a conflict means someone else moved on");
                conflicts += 1;
            }
            Err(other) => panic!("append of id {id} failed: {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_writers_with_retry_land_every_append() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let catalog = catalog.clone();
            tokio::spawn(async move {
                let mut landed = Vec::new();
                let mut conflicts = 0;
                for i in 0..APPENDS_PER_WRITER {
                    let (version, met) =
                        append_with_retry(&catalog, writer * APPENDS_PER_WRITER + i).await;
                    landed.push(version);
                    conflicts += met;
                }
                (landed, conflicts)
            })
        })
        .collect();

    let mut versions = Vec::new();
    let mut conflicts = 0;
    for writer in writers {
        let (landed, met) = writer.await.unwrap();
        versions.extend(landed);
        conflicts += met;
    }
    let total = WRITERS * APPENDS_PER_WRITER;
    let distinct: BTreeSet<i64> = versions.iter().copied().collect();
    assert_eq!(versions.len(), distinct.len(), "no version landed twice");
    assert_eq!(distinct, (1..=total).collect::<BTreeSet<_>>());
    assert!(
        conflicts > 0,
        "the writers never raced; the test proves nothing"
    );

    assert_eq!(catalog.version(&episodes()).await.unwrap(), total);
    let snapshot = catalog.snapshot(&episodes(), None).await.unwrap();
    assert_eq!(snapshot.files.len(), usize::try_from(total).unwrap());
    let rows = sorted_by_id(&read_batches(&snapshot).await.unwrap(), &snapshot.schema);
    assert_eq!(ids(&rows), (0..total).collect::<Vec<_>>());
    // Commits that lost their race left no data file behind.
    assert_eq!(
        super::support::parquet_files(&catalog.table_dir(&episodes())),
        snapshot.files.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_of_one_table_leave_exactly_one_winner() {
    for _round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path()).unwrap();
        let creators: Vec<_> = (0..4)
            .map(|_| {
                let catalog = catalog.clone();
                tokio::spawn(async move {
                    catalog
                        .create_table(&episodes(), super::support::schema())
                        .await
                })
            })
            .collect();
        let mut winners = 0;
        for creator in creators {
            match creator.await.unwrap() {
                Ok(info) => {
                    assert_eq!(info.version, 0);
                    winners += 1;
                }
                Err(CatalogError::TableExists { .. }) => {}
                Err(other) => panic!("a losing create must say the table exists: {other}"),
            }
        }
        assert_eq!(winners, 1);
        assert_eq!(catalog.version(&episodes()).await.unwrap(), 0);
    }
}
