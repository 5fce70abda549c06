use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use datafusion::prelude::SessionContext;
use oxidelake_catalog::register_snapshot;

use super::support::{batch, catalog_with_episodes, episodes};

async fn count(ctx: &SessionContext) -> i64 {
    let batches = ctx
        .sql("SELECT count(*) FROM robots.episodes")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

#[tokio::test]
async fn registration_lets_sql_see_exactly_the_snapshots_rows() {
    let (_dir, catalog) = catalog_with_episodes().await;
    let ctx = SessionContext::new();

    let empty = catalog.snapshot(&episodes(), None).await.unwrap();
    register_snapshot(&ctx, "robots.episodes", &empty).unwrap();
    assert_eq!(count(&ctx).await, 0);

    catalog.append(&episodes(), batch(0..3), 0).await.unwrap();
    let v1 = catalog.snapshot(&episodes(), None).await.unwrap();
    register_snapshot(&ctx, "robots.episodes", &v1).unwrap();
    assert_eq!(count(&ctx).await, 3);

    catalog.append(&episodes(), batch(3..5), 1).await.unwrap();
    assert_eq!(
        count(&ctx).await,
        3,
        "an append is invisible until re-registered"
    );

    let v2 = catalog.snapshot(&episodes(), None).await.unwrap();
    register_snapshot(&ctx, "robots.episodes", &v2).unwrap();
    assert_eq!(count(&ctx).await, 5);

    let sizes = ctx
        .sql("SELECT file['size'] FROM robots.episodes WHERE file IS NOT NULL ORDER BY id")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let sizes: Vec<i64> = sizes
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(sizes, vec![1_001, 1_002, 1_004]);
}
