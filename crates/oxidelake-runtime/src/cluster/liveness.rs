//! How a cluster client notices that the scheduler (or a worker serving results) has
//! stopped answering, so that no client call waits forever.
//!
//! Ballista's client makes two kinds of call. Unary requests (submitting a job,
//! `CancelJob`, `GetJobMetrics`, a pull-mode status poll) end at a deadline. The job
//! status stream of push mode (the default) stays open for the whole query, and a
//! deadline cannot bound it without also bounding how long a query may run. A peer
//! that stopped (SIGSTOP, a hung host, a cut network) keeps its TCP connection open,
//! so nothing on that stream ever fails by itself: `oxide sql --cluster` waited more
//! than 90 s on a stopped scheduler (issue 44). So every connection the client dials
//! also checks that its peer is alive, with HTTP/2 PINGs:
//!
//! ```text
//! dial ─► TLS hook (if any) ─► deadline per request ─► PING after LIVENESS_INTERVAL
//!         without a frame; no PONG within LIVENESS_TIMEOUT: the connection is dropped
//!         and every call on it fails ("the cluster stopped answering")
//! ```
//!
//! A live peer answers a PING in the task that serves the connection, as soon as any
//! of its runtime's threads polls it, also while it plans or runs a long query: only a
//! peer that leaves its connections unpolled for `LIVENESS_TIMEOUT` counts as dead.
//! A stopped one is noticed at most `LIVENESS_INTERVAL + LIVENESS_TIMEOUT` (15 s) after
//! its last frame. Ballista's own defaults (a PING after 300 s of silence, then 20 s) would wait
//! more than five minutes.

use std::sync::Arc;
use std::time::Duration;

use ballista_core::extension::{EndpointOverrideFn, SessionConfigExt};
use datafusion::prelude::SessionConfig;
use tonic::transport::Endpoint;

use super::config::cluster_session_config;
use super::tls::ClusterTls;

/// How long one request may wait for its answer (Ballista's default): a submission is
/// answered once the job is queued, before it is planned.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Silence on a connection after which the client asks its peer for a sign of life.
pub const LIVENESS_INTERVAL: Duration = Duration::from_secs(5);

/// How long the peer has to answer that PING before the connection counts as dead.
pub const LIVENESS_TIMEOUT: Duration = Duration::from_secs(10);

/// A request deadline and a liveness check for the connections of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// How long one request may wait for its answer.
    pub request_timeout: Duration,
    /// Silence after which the peer is pinged.
    pub interval: Duration,
    /// How long the peer has to answer the ping.
    pub timeout: Duration,
}

impl Liveness {
    /// What cluster clients use: [`REQUEST_TIMEOUT`], [`LIVENESS_INTERVAL`] and
    /// [`LIVENESS_TIMEOUT`].
    pub const CLIENT: Liveness = Liveness {
        request_timeout: REQUEST_TIMEOUT,
        interval: LIVENESS_INTERVAL,
        timeout: LIVENESS_TIMEOUT,
    };

    /// The longest a stopped peer goes unnoticed after its last frame.
    pub fn noticed_within(&self) -> Duration {
        self.interval + self.timeout
    }

    /// `endpoint` with this deadline and check.
    pub fn apply(&self, endpoint: Endpoint) -> Endpoint {
        endpoint
            .timeout(self.request_timeout)
            .http2_keep_alive_interval(self.interval)
            .keep_alive_timeout(self.timeout)
            .keep_alive_while_idle(true)
    }
}

/// The hook a client session dials every cluster member through: `tls`'s hook first
/// when the cluster speaks TLS (it rebuilds the endpoint as `https://`), then
/// [`Liveness::CLIENT`].
pub fn client_endpoint_override(tls: Option<EndpointOverrideFn>) -> EndpointOverrideFn {
    Arc::new(
        move |endpoint: Endpoint| -> Result<Endpoint, Box<dyn std::error::Error + Send + Sync>> {
            let endpoint = match &tls {
                Some(tls) => (**tls)(endpoint)?,
                None => endpoint,
            };
            Ok(Liveness::CLIENT.apply(endpoint))
        },
    )
}

/// The session configuration of a cluster client ([`cluster_session_config`]) whose
/// connections carry the deadline and the liveness check, over mutual TLS with `tls`
/// when given.
pub fn client_session_config(tls: Option<&ClusterTls>) -> SessionConfig {
    let hook = client_endpoint_override(tls.map(ClusterTls::endpoint_override));
    cluster_session_config().with_ballista_override_create_grpc_client_endpoint(hook)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use ballista_core::serde::protobuf::GetJobStatusParams;
    use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;

    use super::*;

    #[tokio::test]
    async fn a_call_to_a_peer_that_stopped_answering_fails_once_its_ping_goes_unanswered() {
        // A listener nobody accepts on: the kernel completes the TCP handshake and
        // buffers what the client sends, as it does for a process stopped with SIGSTOP.
        let stopped = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", stopped.local_addr().unwrap());
        let check = Liveness {
            request_timeout: Duration::from_secs(300),
            interval: Duration::from_millis(200),
            timeout: Duration::from_millis(300),
        };
        let started = Instant::now();
        let endpoint = check.apply(Endpoint::from_shared(url).unwrap());
        let answer = tokio::time::timeout(Duration::from_secs(60), async move {
            let channel = endpoint.connect().await?;
            let status = SchedulerGrpcClient::new(channel)
                .get_job_status(GetJobStatusParams { job_id: "j".into() })
                .await;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(status.is_err())
        })
        .await;
        let elapsed = started.elapsed();
        assert!(
            matches!(answer, Ok(Err(_)) | Ok(Ok(true))),
            "the call did not fail by itself: {answer:?}"
        );
        // Far before the request deadline: the unanswered ping ended it.
        assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    }

    #[test]
    fn a_client_notices_a_stopped_peer_well_within_thirty_seconds() {
        assert!(Liveness::CLIENT.noticed_within() <= Duration::from_secs(15));
        assert!(Liveness::CLIENT.request_timeout < Duration::from_secs(30));
    }

    #[test]
    fn a_client_session_dials_through_the_liveness_hook() {
        let config = client_session_config(None);
        let hook = config
            .ballista_override_create_grpc_client_endpoint()
            .expect("a client session dials through a hook");
        let endpoint = hook
            .configure_endpoint(Endpoint::from_static("http://127.0.0.1:50050"))
            .unwrap();
        assert_eq!(endpoint.uri().port_u16(), Some(50050));
    }
}
