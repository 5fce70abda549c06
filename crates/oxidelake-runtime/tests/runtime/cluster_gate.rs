//! The equivalence gate: a scheduler and two executors in this process, plans placed for
//! cuda, results equal to embedded mode, GPU nodes arriving at the executors through the
//! codec, and nothing left running afterwards. And OxideLake's own aggregate semantics
//! on the executors, which resolve `sum` and `max` through their function registry.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Float64Array, Int64Array};
use arrow::record_batch::RecordBatch;
use oxidelake_core::BackendKind;
use oxidelake_planner::FixedProbe;
use oxidelake_runtime::cluster::InProcessCluster;
use oxidelake_runtime::{OxideSession, PlacementTarget};
use oxidelake_storage::{LakeWriterOptions, write_parquet_file};

use super::data::{sorted_rows, write_lake};

/// The query, what its EXPLAIN must show, whether the session asks DataFusion to
/// partition joins (no build side small enough to collect) before it runs, and whether
/// its plan crosses to the device explicitly (ADR-0014: a GPU filter placed for cuda gets
/// its transitions, which the codec ships to the executors). The partitioning switch
/// stays on: the first two queries run collected, the third partitioned, the last two
/// partitioned with their transitions shipped to the executors.
const QUERIES: &[(&str, &str, bool, bool)] = &[
    (
        "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k",
        "GpuPartialAggregateExec[cuda]",
        false,
        false,
    ),
    (
        "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k",
        "GpuHashJoinExec[cuda]",
        false,
        false,
    ),
    (
        "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k",
        "GpuHashJoinExec[cuda]: mode=Partitioned",
        true,
        false,
    ),
    (
        "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t WHERE a > 3 GROUP BY k",
        "HostToDeviceExec[cuda]",
        true,
        true,
    ),
    (
        "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k WHERE t.a > 3",
        "DeviceToHostExec[cuda]",
        true,
        true,
    ),
];

/// The transition nodes of ADR-0014.
const TRANSITIONS: [&str; 2] = ["HostToDeviceExec", "DeviceToHostExec"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_executor_cluster_placed_for_cuda_equals_embedded_mode_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let tables = write_lake(dir.path());
    let embedded = OxideSession::local_with(
        PlacementTarget::Cpu,
        Arc::new(FixedProbe(BackendKind::CpuSimd)),
    );
    for (name, path) in &tables {
        embedded.register_parquet(name, path).await.unwrap();
    }

    let cluster = InProcessCluster::start(2, 2, BackendKind::Cuda)
        .await
        .unwrap();
    let port = cluster.scheduler_port();
    let remote = OxideSession::connect(&cluster.url()).await.unwrap();
    for (name, path) in &tables {
        remote.register_parquet(name, path).await.unwrap();
    }
    remote
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();

    for (sql, tag, partitioned, transitions) in QUERIES {
        if *partitioned {
            for option in [
                "hash_join_single_partition_threshold",
                "hash_join_single_partition_threshold_rows",
            ] {
                remote
                    .sql(&format!("SET datafusion.optimizer.{option} = 0"))
                    .await
                    .unwrap();
            }
        }
        let before = cluster.gpu_nodes_received_by_executors();
        let transitions_before = TRANSITIONS.map(|name| cluster.nodes_received_by_executors(name));
        let expected = sorted_rows(&embedded.sql(sql).await.unwrap());
        let got = tokio::time::timeout(Duration::from_secs(120), remote.sql(sql))
            .await
            .expect("cluster query finished within 2 minutes")
            .unwrap();
        let got = sorted_rows(&got);
        if expected != got {
            println!("{}", remote.explain(sql).await.unwrap());
            let analyzed = remote
                .context()
                .sql(&format!("EXPLAIN ANALYZE {sql}"))
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            println!(
                "{}",
                arrow::util::pretty::pretty_format_batches(&analyzed).unwrap()
            );
        }
        assert!(
            expected == got,
            "{sql}: cluster result differs: {} rows embedded, {} in the cluster; first: {:?} vs {:?}",
            expected.len(),
            got.len(),
            expected.first(),
            got.first()
        );
        let received = cluster.gpu_nodes_received_by_executors() - before;
        assert!(received > 0, "{sql}: no GPU node reached an executor");
        // Each transition the scheduler's plan holds reached an executor through the
        // codec, and no other (a partial aggregate reading device batches brings back its
        // own groups, so such a plan has no download).
        let plan = remote.explain(sql).await.unwrap();
        let shown: Vec<&str> = TRANSITIONS
            .into_iter()
            .filter(|name| plan.contains(name))
            .collect();
        if *transitions {
            assert!(!shown.is_empty(), "{sql}: no transition in\n{plan}");
        }
        for (name, before) in TRANSITIONS.into_iter().zip(transitions_before) {
            let arrived = cluster.nodes_received_by_executors(name) - before;
            assert_eq!(
                arrived > 0,
                shown.contains(&name),
                "{sql}: {arrived} {name} decoded by executors\n{plan}"
            );
        }
        let explain = remote.explain(sql).await.unwrap();
        assert!(explain.contains(tag), "{sql}\n{explain}");
        println!(
            "cluster gate: {sql}: {} rows equal, {received} GPU nodes decoded by executors",
            expected.len()
        );
    }

    let mut ports = vec![port];
    ports.extend_from_slice(cluster.executor_ports());
    drop(remote);
    cluster.shutdown();
    // The scheduler's and the executors' ports stop accepting connections.
    for port in ports {
        let mut closed = false;
        for _ in 0..50 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                closed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(closed, "port {port} still open after shutdown");
    }
}

/// Table `ends` under `dir`, two files (two partitions): group 1 of `i` sums to
/// 2·i64::MAX + 1 in the first file and to 2·i64::MIN − 3 in the second, −4 in all;
/// group 2 to i64::MAX + 15, past Int64. `v` holds a NaN in group 1 only, beside the
/// values a MAX that misorders NaN returns instead (2.0 in its file, 4.0 in the other).
fn write_ends(dir: &std::path::Path) -> String {
    let table = dir.join("ends");
    std::fs::create_dir_all(&table).unwrap();
    let files = [
        (
            [i64::MAX, i64::MAX, 1, i64::MAX, 5],
            [f64::NAN, 2.0, -3.0, 1.0, 0.5],
        ),
        ([i64::MIN, i64::MIN, -3, 10, 0], [2.5, -1.0, 4.0, 2.0, -0.5]),
    ];
    for (n, (i, v)) in files.into_iter().enumerate() {
        let batch = RecordBatch::try_from_iter([
            (
                "g",
                Arc::new(Int64Array::from(vec![1, 1, 1, 2, 2])) as ArrayRef,
            ),
            ("i", Arc::new(Int64Array::from(i.to_vec())) as ArrayRef),
            ("v", Arc::new(Float64Array::from(v.to_vec())) as ArrayRef),
        ])
        .unwrap();
        write_parquet_file(
            table.join(format!("part-{n}.parquet")),
            batch.schema(),
            std::slice::from_ref(&batch),
            &LakeWriterOptions::default(),
        )
        .unwrap();
    }
    format!("{}/", table.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_raises_sum_overflow_adds_mixed_signs_exactly_and_takes_nan_as_the_largest_float()
{
    let dir = tempfile::tempdir().unwrap();
    let ends = write_ends(dir.path());
    let cluster = InProcessCluster::start(2, 2, BackendKind::Cuda)
        .await
        .unwrap();
    let remote = OxideSession::connect(&cluster.url()).await.unwrap();
    remote
        .sql("SET datafusion.execution.target_partitions = 2")
        .await
        .unwrap();
    remote.register_parquet("ends", &ends).await.unwrap();
    let run = |sql: &'static str| {
        let remote = &remote;
        async move {
            tokio::time::timeout(Duration::from_secs(120), remote.sql(sql))
                .await
                .expect("cluster query finished within 2 minutes")
        }
    };
    for target in ["cpu", "cuda"] {
        remote
            .sql(&format!("SET oxidelake.placement.target = '{target}'"))
            .await
            .unwrap();
        // The partial sums of group 1 leave Int64 in each partition; the executors' final
        // aggregate adds their states exactly.
        let rows = run("SELECT g, SUM(i) FROM ends WHERE g = 1 GROUP BY g")
            .await
            .unwrap();
        assert_eq!(sorted_rows(&rows), ["1|-4"], "{target}");
        let rows = run("SELECT SUM(i) FROM ends WHERE g = 1").await.unwrap();
        assert_eq!(sorted_rows(&rows), ["-4"], "{target}");
        // Group 2's total leaves Int64: the overflow error, not a wrapped number.
        let err = run("SELECT g, SUM(i) FROM ends GROUP BY g")
            .await
            .expect_err("group 2 sums past i64::MAX")
            .to_string();
        assert!(
            err.contains("Arithmetic overflow: SUM over Int64 exceeds its range"),
            "{target}: {err}"
        );
        // OxideLake's `max` orders NaN above every number, grouped as ungrouped.
        let rows = run("SELECT g, MAX(v) FROM ends GROUP BY g").await.unwrap();
        assert_eq!(sorted_rows(&rows), ["1|NaN", "2|2.0"], "{target}");
    }
    drop(remote);
    cluster.shutdown();
}
