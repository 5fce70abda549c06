//! Parquet written by `LakeParquetWriter` is pruned by statistics and by Bloom filter, and
//! pruning never changes a result.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_storage::{LakeWriterOptions, ParquetCompression, ScanOptions, lake_session_config};

use super::data::{ROW_GROUP_ROWS, k_of, sorted_rows, write_dataset};

#[derive(Debug, Default, PartialEq, Eq)]
struct Pruning {
    stats_pruned: usize,
    stats_matched: usize,
    bloom_pruned: usize,
    bloom_matched: usize,
}

fn pruning_of(plan: &Arc<dyn ExecutionPlan>) -> Pruning {
    let mut out = Pruning::default();
    plan.apply(|node| {
        if node.is::<DataSourceExec>()
            && let Some(metrics) = node.metrics()
        {
            if let Some(MetricValue::PruningMetrics {
                pruning_metrics, ..
            }) = metrics.sum_by_name("row_groups_pruned_statistics")
            {
                out.stats_pruned += pruning_metrics.pruned();
                out.stats_matched += pruning_metrics.matched();
            }
            if let Some(MetricValue::PruningMetrics {
                pruning_metrics, ..
            }) = metrics.sum_by_name("row_groups_pruned_bloom_filter")
            {
                out.bloom_pruned += pruning_metrics.pruned();
                out.bloom_matched += pruning_metrics.matched();
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    out
}

async fn run(
    options: ScanOptions,
    path: &str,
    sql: &str,
) -> (Vec<arrow::record_batch::RecordBatch>, Pruning) {
    let ctx = SessionContext::new_with_config(options.apply(lake_session_config()));
    oxidelake_storage::register_parquet(&ctx, "t", path)
        .await
        .unwrap();
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    (batches, pruning_of(&plan))
}

#[tokio::test]
async fn a_selective_query_prunes_row_groups_by_statistics_and_by_bloom_filter_and_matches_the_unpruned_result()
 {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lake.parquet");
    let written = write_dataset(&file, 0, 10, LakeWriterOptions::default());
    assert_eq!(written.row_groups, 10);
    let path = file.to_str().unwrap();

    // id >= 5 row groups' worth excludes row groups 0..5 by min/max; the k value exists
    // only in row group 7, so the Bloom filters exclude the other kept row groups.
    let from = (5 * ROW_GROUP_ROWS) as i64;
    let target_id = (7 * ROW_GROUP_ROWS + 123) as i64;
    let sql = format!(
        "SELECT id, k, x, tag FROM t WHERE id >= {from} AND k = {}",
        k_of(target_id)
    );
    let (pruned, metrics) = run(ScanOptions::pruning_on(), path, &sql).await;
    let (unpruned, off) = run(ScanOptions::pruning_off(), path, &sql).await;
    println!("pruning on: {metrics:?}; pruning off: {off:?}");

    assert_eq!(metrics.stats_pruned, 5, "{metrics:?}");
    assert_eq!(metrics.stats_matched, 5, "{metrics:?}");
    assert!(metrics.bloom_pruned >= 3, "{metrics:?}");
    assert_eq!(
        metrics.bloom_pruned + metrics.bloom_matched,
        5,
        "{metrics:?}"
    );
    assert_eq!(off.stats_pruned + off.bloom_pruned, 0, "{off:?}");

    // k_of is injective over the dataset, so exactly the target row matches.
    let rows = sorted_rows(&pruned);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].starts_with(&format!("{target_id}|")), "{rows:?}");
    assert_eq!(rows, sorted_rows(&unpruned));
}

#[tokio::test]
async fn every_compression_codec_round_trips_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [
        ParquetCompression::None,
        ParquetCompression::Lz4,
        ParquetCompression::Zstd,
    ] {
        let file = dir.path().join(format!("{codec:?}.parquet"));
        write_dataset(
            &file,
            0,
            1,
            LakeWriterOptions::default().with_compression(codec),
        );
        let ctx = SessionContext::new_with_config(lake_session_config());
        let batches = oxidelake_storage::read_parquet(&ctx, file.to_str().unwrap())
            .await
            .unwrap();
        let expected = super::data::batch(0, ROW_GROUP_ROWS);
        assert!(
            sorted_rows(&batches) == sorted_rows(&[expected]),
            "{codec:?}: rows differ"
        );
    }
}
