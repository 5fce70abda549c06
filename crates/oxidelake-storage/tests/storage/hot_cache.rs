//! The IPC hot cache serves later SQL queries without decoding Parquet, and is rebuilt
//! when the Parquet source changes.

use datafusion::prelude::SessionContext;
use oxidelake_storage::{HotCache, LakeWriterOptions, ipc, lake_session_config};

use super::data::{ROW_GROUP_ROWS, sorted_rows, write_dataset};

const SQL: &str = "SELECT count(*) AS n, sum(k) AS s, max(id) AS m FROM t WHERE x IS NOT NULL";

#[tokio::test]
async fn a_cached_table_answers_from_its_ipc_copy_until_the_parquet_source_changes() {
    let lake = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_dataset(
        &lake.path().join("a.parquet"),
        0,
        1,
        LakeWriterOptions::default(),
    );
    write_dataset(
        &lake.path().join("b.parquet"),
        ROW_GROUP_ROWS as i64,
        1,
        LakeWriterOptions::default(),
    );
    let ctx = SessionContext::new_with_config(lake_session_config());
    let dir_url = format!("{}/", lake.path().display());
    oxidelake_storage::register_parquet(&ctx, "t", &dir_url)
        .await
        .unwrap();
    let from_parquet = ctx.sql(SQL).await.unwrap().collect().await.unwrap();

    let cache = HotCache::local(cache_dir.path()).unwrap();
    let info = cache.cache_table(&ctx, "t").await.unwrap();
    assert_eq!(info.source_files, 2);
    assert_eq!(info.rows, 2 * ROW_GROUP_ROWS as u64);
    let ipc_file = cache_dir.path().join(&info.ipc_path);
    assert!(ipc_file.is_file(), "{ipc_file:?}");
    let (_, copy) = ipc::decode_file(std::fs::read(&ipc_file).unwrap()).unwrap();
    assert!(copy.iter().all(ipc::buffers_are_64_byte_aligned));

    // Later queries read the IPC copy and answer the same.
    let from_cache = ctx.sql(SQL).await.unwrap().collect().await.unwrap();
    assert_eq!(sorted_rows(&from_cache), sorted_rows(&from_parquet));
    let counters = cache.counters();
    assert_eq!(
        (counters.builds, counters.ipc_scans),
        (1, 1),
        "{counters:?}"
    );

    // Rewriting a source file (more rows now) invalidates the copy.
    write_dataset(
        &lake.path().join("b.parquet"),
        ROW_GROUP_ROWS as i64,
        2,
        LakeWriterOptions::default(),
    );
    let after_change = ctx.sql(SQL).await.unwrap().collect().await.unwrap();
    let counters = cache.counters();
    assert_eq!(
        (counters.builds, counters.ipc_scans),
        (2, 2),
        "{counters:?}"
    );
    let fresh = SessionContext::new_with_config(lake_session_config());
    oxidelake_storage::register_parquet(&fresh, "t", &dir_url)
        .await
        .unwrap();
    let expected = fresh.sql(SQL).await.unwrap().collect().await.unwrap();
    assert_eq!(sorted_rows(&after_change), sorted_rows(&expected));
    assert_ne!(sorted_rows(&after_change), sorted_rows(&from_parquet));
}

#[tokio::test]
async fn caching_a_table_that_is_not_file_backed_is_unsupported() {
    let ctx = SessionContext::new();
    ctx.sql("CREATE TABLE m AS VALUES (1), (2)")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let err = HotCache::local(cache_dir.path())
        .unwrap()
        .cache_table(&ctx, "m")
        .await
        .unwrap_err();
    assert!(
        matches!(err, oxidelake_core::EngineError::Unsupported { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn two_tables_of_the_same_name_over_different_sources_each_read_their_own_rows() {
    let (lake_a, lake_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_dataset(
        &lake_a.path().join("a.parquet"),
        0,
        1,
        LakeWriterOptions::default(),
    );
    write_dataset(
        &lake_b.path().join("b.parquet"),
        10 * ROW_GROUP_ROWS as i64,
        2,
        LakeWriterOptions::default(),
    );
    // One cache directory shared by two sessions, each with its own table `t`.
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = HotCache::local(cache_dir.path()).unwrap();
    let mut sessions = Vec::new();
    for lake in [&lake_a, &lake_b] {
        let ctx = SessionContext::new_with_config(lake_session_config());
        let url = format!("{}/", lake.path().display());
        oxidelake_storage::register_parquet(&ctx, "t", &url)
            .await
            .unwrap();
        let from_parquet = ctx.sql(SQL).await.unwrap().collect().await.unwrap();
        sessions.push((ctx, from_parquet));
    }
    let mut ipc_paths = Vec::new();
    for (ctx, _) in &sessions {
        ipc_paths.push(cache.cache_table(ctx, "t").await.unwrap().ipc_path);
    }
    assert_ne!(ipc_paths[0], ipc_paths[1]);
    for (ctx, from_parquet) in &sessions {
        let from_cache = ctx.sql(SQL).await.unwrap().collect().await.unwrap();
        assert_eq!(sorted_rows(&from_cache), sorted_rows(from_parquet));
    }
    assert_ne!(sorted_rows(&sessions[0].1), sorted_rows(&sessions[1].1));
    let counters = cache.counters();
    assert_eq!(
        (counters.builds, counters.ipc_scans),
        (2, 2),
        "{counters:?}"
    );
}
