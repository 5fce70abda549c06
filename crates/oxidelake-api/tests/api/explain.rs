//! `DataFrame::explain` shows the plan as the session places it when it is called.

use oxidelake_api::{DataFrame, DistanceMetric, Session, col, lit, max, min, sum};

use super::fixtures::{Lake, rows};

/// A filter, a grouped aggregate, a join and a vector distance over `t` and `d`.
pub async fn frames(session: &Session) -> Vec<(&'static str, DataFrame)> {
    let t = || async { session.table("t").await.unwrap() };
    vec![
        (
            "GpuFilterExec[cuda]",
            t().await
                .filter(col("a").lt(lit(30)).and(col("b").gt_eq(lit(0.0))))
                .unwrap()
                .select(&["k", "a"])
                .unwrap(),
        ),
        (
            "GpuPartialAggregateExec[cuda]",
            t().await
                .aggregate(
                    vec![col("k")],
                    vec![sum(col("a")), min(col("b")), max(col("b"))],
                )
                .unwrap(),
        ),
        (
            "GpuHashJoinExec[cuda]",
            t().await
                .select(&["k", "a"])
                .unwrap()
                .join(session.table("d").await.unwrap(), &["k"], &["k"])
                .unwrap()
                .select(&["a", "name"])
                .unwrap(),
        ),
        (
            "GpuVectorDistanceExec[cuda]",
            t().await
                .vector_distance("v", vec![0.5, 2.0], DistanceMetric::L2, "dist")
                .unwrap()
                .select(&["k", "dist"])
                .unwrap(),
        ),
        (
            "GpuVectorDistanceExec[cuda]",
            t().await
                .vector_distance("v", vec![0.5, 2.0], DistanceMetric::Cosine, "dist")
                .unwrap()
                .select(&["k", "dist"])
                .unwrap(),
        ),
    ]
}

pub async fn set_target(session: &Session, target: &str) {
    session
        .sql(&format!("SET oxidelake.placement.target = '{target}'"))
        .await
        .unwrap();
}

#[tokio::test]
async fn explain_with_target_cuda_shows_gpu_operators_even_for_frames_built_before_the_set() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let frames = frames(&session).await;
    set_target(&session, "cuda").await;
    for (operator, frame) in &frames {
        let text = frame.explain().await.unwrap();
        assert!(text.contains(operator), "expected {operator} in\n{text}");
    }
}

#[tokio::test]
async fn explain_with_target_cpu_rewrites_nothing_and_says_why() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    set_target(&session, "cpu").await;
    for (operator, frame) in frames(&session).await {
        let text = frame.explain().await.unwrap();
        assert!(!text.contains("Gpu"), "{text}");
        if operator.starts_with("GpuVectorDistanceExec") {
            // Left alone, DataFusion folds the projection into the Parquet scan.
            assert!(
                text.contains("_distance(") && text.contains("as dist"),
                "{text}"
            );
        } else {
            assert!(text.contains("[cpu: placement target is cpu]"), "{text}");
        }
    }
}

#[tokio::test]
async fn frames_placed_for_cuda_return_the_rows_of_frames_placed_for_the_cpu() {
    let lake = Lake::new().await;
    let mut results = Vec::new();
    for target in ["cpu", "cuda"] {
        let session = lake.session().await;
        set_target(&session, target).await;
        let mut per_frame = Vec::new();
        for (_, frame) in frames(&session).await {
            per_frame.push(rows(&frame.collect().await.unwrap()));
        }
        results.push(per_frame);
    }
    assert_eq!(results[0], results[1]);
    assert!(results[0].iter().all(|r| !r.is_empty()), "{:?}", results[0]);
}
