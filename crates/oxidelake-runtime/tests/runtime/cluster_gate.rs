//! The equivalence gate: a scheduler and two executors in this process, plans placed for
//! cuda, results equal to embedded mode, GPU nodes arriving at the executors through the
//! codec, and nothing left running afterwards.

use std::sync::Arc;
use std::time::Duration;

use oxidelake_core::BackendKind;
use oxidelake_planner::FixedProbe;
use oxidelake_runtime::cluster::InProcessCluster;
use oxidelake_runtime::{OxideSession, PlacementTarget};

use super::data::{sorted_rows, write_lake};

/// The query, what its EXPLAIN must show, whether the session asks DataFusion to
/// partition joins (no build side small enough to collect) before it runs, and whether it
/// turns on device-resident batches (ADR-0014) before it runs. The switches stay on: the
/// first two queries run collected, the third partitioned, the last two partitioned with
/// their transitions shipped to the executors by the codec.
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

    for (sql, tag, partitioned, resident) in QUERIES {
        if *resident {
            remote
                .sql("SET oxidelake.execution.device_resident = true")
                .await
                .unwrap();
        }
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
        if *resident {
            // Each transition the scheduler's plan holds reached an executor through the
            // codec (a partial aggregate reading device batches brings back its own
            // groups, so such a plan has no download).
            let plan = remote.explain(sql).await.unwrap();
            let shown: Vec<&str> = TRANSITIONS
                .into_iter()
                .filter(|name| plan.contains(name))
                .collect();
            assert!(!shown.is_empty(), "{sql}: no transition in\n{plan}");
            for (name, before) in TRANSITIONS.into_iter().zip(transitions_before) {
                let arrived = cluster.nodes_received_by_executors(name) - before;
                assert_eq!(
                    arrived > 0,
                    shown.contains(&name),
                    "{sql}: {arrived} {name} decoded by executors\n{plan}"
                );
            }
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
