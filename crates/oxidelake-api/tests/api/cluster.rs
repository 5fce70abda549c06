//! The same fluent frames through `Session::connect` to an in-process cluster.

use std::time::Duration;

use oxidelake_api::Session;
use oxidelake_runtime::cluster::{InProcessCluster, cluster_backend_from_env};

use super::explain::{frames, set_target};
use super::fixtures::{Lake, rows};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_session_returns_embedded_rows_and_explains_with_placement() {
    let lake = Lake::new().await;
    let embedded = lake.session().await;
    set_target(&embedded, "cpu").await;

    // The scheduler's own backend does not matter: the session asks for cuda.
    let backend = cluster_backend_from_env().unwrap();
    let cluster = InProcessCluster::start(1, 2, backend).await.unwrap();
    let remote = Session::connect(&cluster.url()).await.unwrap();
    lake.register(&remote).await;
    set_target(&remote, "cuda").await;

    let expected = frames(&embedded).await;
    for ((operator, frame), (_, local)) in frames(&remote).await.into_iter().zip(expected) {
        let text = frame.explain().await.unwrap();
        assert!(text.contains(operator), "expected {operator} in\n{text}");
        let before = cluster.gpu_nodes_received_by_executors();
        let got = tokio::time::timeout(Duration::from_secs(120), frame.collect())
            .await
            .expect("cluster query finished within 2 minutes")
            .unwrap();
        assert_eq!(
            rows(&got),
            rows(&local.collect().await.unwrap()),
            "{operator}"
        );
        assert!(
            cluster.gpu_nodes_received_by_executors() > before,
            "{operator}: no GPU node reached an executor"
        );
    }
    drop(remote);
    cluster.shutdown();
}
