//! Each fluent operation returns what the same query returns in SQL.

use oxidelake_api::{DistanceMetric, Error, col, count, lit, max, min, sum};

use super::fixtures::{Lake, assert_same_as_sql, rows};

#[tokio::test]
async fn filter_and_select_return_the_rows_of_the_same_sql() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let frame = session
        .table("t")
        .await
        .unwrap()
        .filter(col("a").gt(lit(20)).and(col("b").lt_eq(lit(15.0))))
        .unwrap()
        .select(&["k", "b"])
        .unwrap();
    let sql = "SELECT k, b FROM t WHERE a > 20 AND b <= 15.0";
    assert_same_as_sql(&session, frame, sql, 10).await;
}

#[tokio::test]
async fn read_parquet_reads_the_file_a_registered_table_reads() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let frame = session
        .read_parquet(&lake.t)
        .await
        .unwrap()
        .select(&["k", "a", "b", "v"])
        .unwrap();
    assert_same_as_sql(&session, frame, "SELECT k, a, b, v FROM t", 40).await;
}

#[tokio::test]
async fn aggregate_returns_the_groups_of_the_same_sql() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let frame = session
        .table("t")
        .await
        .unwrap()
        .aggregate(
            vec![col("k")],
            vec![sum(col("a")), count(col("a")), min(col("b")), max(col("b"))],
        )
        .unwrap();
    let sql = "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k";
    // Five keys and the NULL group.
    assert_same_as_sql(&session, frame, sql, 6).await;
}

#[tokio::test]
async fn an_inner_join_returns_the_rows_of_the_same_sql() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let t = session
        .table("t")
        .await
        .unwrap()
        .select(&["k", "a"])
        .unwrap();
    let d = session.read_parquet(&lake.d).await.unwrap();
    let frame = t
        .join(d, &["k"], &["k"])
        .unwrap()
        .select(&["a", "name"])
        .unwrap();
    let sql = "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k";
    assert_same_as_sql(&session, frame, sql, 20).await;
}

#[tokio::test]
async fn vector_distance_returns_l2_distance_and_cosine_distance_of_the_same_sql() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    for (metric, sql) in [
        (
            DistanceMetric::L2,
            "SELECT k, l2_distance(v, [1.0, -2.5]) FROM t",
        ),
        // DataFusion's own L2: the same numbers.
        (
            DistanceMetric::L2,
            "SELECT k, array_distance(v, [1.0, -2.5]) FROM t",
        ),
        (
            DistanceMetric::Cosine,
            "SELECT k, cosine_distance(v, [1.0, -2.5]) FROM t",
        ),
    ] {
        let frame = session
            .table("t")
            .await
            .unwrap()
            .vector_distance("v", vec![1.0, -2.5], metric, "dist")
            .unwrap()
            .select(&["k", "dist"])
            .unwrap();
        assert_same_as_sql(&session, frame, sql, 40).await;
    }
}

#[tokio::test]
async fn vector_distance_is_null_for_null_vectors_and_for_cosine_of_a_zero_vector() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let t = session.table("t").await.unwrap();
    let frame = t
        .vector_distance("v", vec![1.0, 1.0], DistanceMetric::L2, "l2")
        .unwrap()
        .vector_distance("v", vec![1.0, 1.0], DistanceMetric::Cosine, "cos")
        .unwrap()
        .select(&["l2", "cos"])
        .unwrap();
    let got = rows(&frame.collect().await.unwrap());
    // 40 rows, every 6th NULL (6 of them); row 0 is the zero vector.
    assert_eq!(
        got.iter().filter(|r| *r == "NULL|NULL").count(),
        6,
        "{got:?}"
    );
    let sqrt2 = format!("{}|NULL", 2.0f64.sqrt());
    assert_eq!(got.iter().filter(|r| **r == sqrt2).count(), 1, "{got:?}");
}

#[tokio::test]
async fn a_query_vector_of_the_wrong_length_is_rejected_before_running() {
    let lake = Lake::new().await;
    let session = lake.session().await;
    let err = session
        .table("t")
        .await
        .unwrap()
        .vector_distance("v", vec![1.0, 2.0, 3.0], DistanceMetric::L2, "d")
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::InvalidArgument {
                what: "query vector",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("vectors of 2"), "{err}");
}

#[tokio::test]
async fn l2_distance_works_in_sql_through_the_session() {
    let session = oxidelake_api::Session::local();
    let batches = session
        .sql("SELECT l2_distance([0.0, 0.0], [3.0, 4.0]) AS d")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(rows(&batches), vec!["5.0".to_string()]);
    // The same through OxideSession::sql (what `oxide sql` runs).
    let batches = session
        .oxide()
        .sql("SELECT l2_distance([1.0, 1.0], [1.0, 1.0]) AS d")
        .await
        .unwrap();
    assert_eq!(rows(&batches), vec!["0.0".to_string()]);
}

#[tokio::test]
async fn sql_refuses_a_chain_deeper_than_the_planning_limit_before_parsing_it() {
    let session = oxidelake_api::Session::local();
    let terms = oxidelake_runtime::MAX_STATEMENT_DEPTH + 2;
    let sql = format!("SELECT 1{}", "+1".repeat(terms - 1));
    let Err(err) = session.sql(&sql).await else {
        panic!("a statement past the depth limit must be refused")
    };
    assert!(
        matches!(
            &err,
            Error::InvalidArgument {
                what: "statement",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("at most"), "{err}");
}
