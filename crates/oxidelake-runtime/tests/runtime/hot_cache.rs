//! The hot cache from the user's side: `CACHE TABLE` / `UNCACHE TABLE` in SQL and
//! `oxide sql --cache`, with the rows of the Parquet table either way.

use arrow::array::{Array, AsArray};
use arrow::datatypes::UInt64Type;

use super::data::{sorted_rows, tpch_lake};

const QUERY: &str = "SELECT l_returnflag, COUNT(*), SUM(l_quantity) FROM lineitem \
     WHERE l_shipdate < DATE '1995-01-01' GROUP BY l_returnflag";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_table_serves_repeat_queries_from_arrow_ipc_until_uncache_table() {
    let (_data, session) = tpch_lake(0.01).await;
    // The TPC-H folder is shared and read-only: the copies go to a folder of this test.
    let dir = tempfile::tempdir().unwrap();
    session.set_hot_cache_dir(dir.path().join("hot"));
    let from_parquet = session.sql(QUERY).await.unwrap();
    let lineitem_rows = session.sql("SELECT COUNT(*) FROM lineitem").await.unwrap()[0]
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .value(0) as u64;

    // Unquoted names fold to lower case, as DataFusion resolves them.
    let info = session.sql("CACHE TABLE LineItem").await.unwrap();
    assert_eq!(info[0].num_rows(), 1);
    assert_eq!(info[0].column(0).as_string::<i32>().value(0), "lineitem");
    assert_eq!(
        info[0].column(1).as_primitive::<UInt64Type>().value(0),
        lineitem_rows
    );
    assert!(info[0].column(2).as_primitive::<UInt64Type>().value(0) > 0);
    assert!(dir.path().join("hot").read_dir().unwrap().next().is_some());

    let scans = session.hot_cache_counters().ipc_scans;
    let from_ipc = session.sql(QUERY).await.unwrap();
    assert_eq!(sorted_rows(&from_ipc), sorted_rows(&from_parquet));
    assert!(
        session.hot_cache_counters().ipc_scans > scans,
        "the repeat query read the IPC copy"
    );

    let out = session.sql("UNCACHE TABLE lineitem").await.unwrap();
    assert!(out[0].column(1).as_boolean().value(0));
    let scans = session.hot_cache_counters().ipc_scans;
    let again = session.sql(QUERY).await.unwrap();
    assert_eq!(sorted_rows(&again), sorted_rows(&from_parquet));
    assert_eq!(
        session.hot_cache_counters().ipc_scans,
        scans,
        "after UNCACHE the query reads Parquet"
    );

    let out = session.sql("UNCACHE TABLE IF EXISTS nosuch").await.unwrap();
    assert!(!out[0].column(1).as_boolean().value(0));
    assert!(out[0].column(1).null_count() == 0);
    assert!(session.sql("UNCACHE TABLE nosuch").await.is_err());
    let err = session
        .sql("CACHE TABLE t AS SELECT 1")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("CACHE TABLE"), "{err}");
}
