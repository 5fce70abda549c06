//! The client's own requests to its scheduler, beside the job Ballista submits: the
//! stage figures `oxide tui --cluster` shows (`GetJobMetrics`) and `CancelJob` when a
//! query is stopped early.
//!
//! Ballista's client does not cancel a job whose result stream is dropped: a query the
//! user stopped (Ctrl-C in `oxide sql`, q in `oxide tui`) would run to its end on the
//! workers unless the client asks the scheduler to cancel it. One connection is dialled
//! as the session dials the scheduler (through its hook: TLS, deadline, liveness check),
//! and every request has a deadline, so a scheduler that stopped answering costs the
//! caller at most that long: [`ANSWER_TIMEOUT_SECS`] for a dashboard refresh, which the
//! next refresh replaces, [`CANCEL_TIMEOUT_SECS`] for `CancelJob`, whose answer a busy scheduler
//! (its event loop stopping the job's tasks) may take longer to give and which is not
//! asked again.

use std::sync::Arc;
use std::time::Duration;

use ballista_core::execution_plans::DistributedQueryExec;
use ballista_core::extension::{BallistaConfigGrpcEndpoint, SessionConfigExt};
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::protobuf::{CancelJobParams, GetJobMetricsParams, JobStageMetrics};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::protobuf::LogicalPlanNode;
use tonic::transport::{Channel, Endpoint};

use crate::{OxideSession, SessionMode};

/// How long a dashboard's request (`GetJobMetrics`) may take: it serves a user who is
/// watching, and the next refresh asks again.
pub(crate) const ANSWER_TIMEOUT_SECS: u64 = 2;

/// How long `CancelJob` may take: the user is leaving, but a job left running holds the
/// cluster's workers, so the scheduler gets longer to answer than a dashboard refresh.
pub(crate) const CANCEL_TIMEOUT_SECS: u64 = 15;

/// A connection to a cluster session's scheduler, dialled on first use.
pub(crate) struct SchedulerClient {
    /// `http://host:port` of the scheduler.
    endpoint: String,
    /// The session's hook for dialling cluster members, if it has one.
    customize: Option<Arc<BallistaConfigGrpcEndpoint>>,
    /// The connection, once made; dropped after a failed request so the next one
    /// dials again.
    client: Option<SchedulerGrpcClient<Channel>>,
}

impl SchedulerClient {
    /// The scheduler of a cluster session; `None` for an embedded session.
    pub(crate) fn for_session(session: &OxideSession) -> Option<Self> {
        let SessionMode::Cluster(url) = session.mode() else {
            return None;
        };
        let address = url.strip_prefix("df://").unwrap_or(url);
        Some(Self {
            endpoint: format!("http://{address}"),
            customize: session
                .context()
                .copied_config()
                .ballista_override_create_grpc_client_endpoint(),
            client: None,
        })
    }

    /// A client of a "scheduler" on 127.0.0.1 that takes connections and never answers,
    /// for tests of deadlines; the listener must live as long as the client is used.
    #[cfg(test)]
    pub(crate) fn of_silent_scheduler() -> (std::net::TcpListener, Self) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = Self {
            endpoint: format!("http://{}", listener.local_addr().unwrap()),
            customize: None,
            client: None,
        };
        (listener, client)
    }

    /// `http://host:port` of the scheduler.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The connection to the scheduler, dialled on first use.
    async fn client(&mut self) -> Result<SchedulerGrpcClient<Channel>, String> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let endpoint = &self.endpoint;
        let mut dial = Endpoint::from_shared(endpoint.clone())
            .map_err(|e| format!("scheduler {endpoint}: {e}"))?;
        if let Some(customize) = &self.customize {
            dial = customize
                .configure_endpoint(dial)
                .map_err(|e| format!("scheduler {endpoint}: {e}"))?;
        }
        let channel = dial
            .connect()
            .await
            .map_err(|e| format!("scheduler {endpoint}: {e}"))?;
        let client = SchedulerGrpcClient::new(channel);
        self.client = Some(client.clone());
        Ok(client)
    }

    /// `call` with the scheduler's client, given up after `timeout`; a failure drops
    /// the connection so the next request dials again.
    async fn ask<T, F, Fut>(&mut self, timeout: Duration, call: F) -> Result<T, String>
    where
        F: FnOnce(SchedulerGrpcClient<Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<T, tonic::Status>>,
    {
        let endpoint = self.endpoint.clone();
        let request = async {
            let client = self.client().await?;
            call(client)
                .await
                .map_err(|status| status.message().to_string())
        };
        let answer = tokio::time::timeout(timeout, request)
            .await
            .map_err(|_| format!("scheduler {endpoint} did not answer within {timeout:?}"))
            .and_then(|answer| answer);
        if answer.is_err() {
            self.client = None;
        }
        answer
    }

    /// The completed stages of job `job_id`, with their operators' metrics.
    pub(crate) async fn job_stages(
        &mut self,
        job_id: &str,
    ) -> Result<Vec<JobStageMetrics>, String> {
        let job_id = job_id.to_string();
        let answer = self
            .ask(Duration::from_secs(ANSWER_TIMEOUT_SECS), |mut client| async move {
                client.get_job_metrics(GetJobMetricsParams { job_id }).await
            })
            .await?;
        Ok(answer.into_inner().stages)
    }

    /// Asks the scheduler to cancel job `job_id`, waiting up to [`CANCEL_TIMEOUT_SECS`];
    /// returns whether it says it did.
    pub(crate) async fn cancel_job(&mut self, job_id: &str) -> Result<bool, String> {
        let job_id = job_id.to_string();
        let answer = self
            .ask(
                Duration::from_secs(CANCEL_TIMEOUT_SECS),
                |mut client| async move { client.cancel_job(CancelJobParams { job_id }).await },
            )
            .await?;
        Ok(answer.into_inner().cancelled)
    }
}

/// The `DistributedQueryExec` at or under the root of `plan` (EXPLAIN ANALYZE wraps it):
/// the job a cluster query submitted.
fn submitted_job(plan: &Arc<dyn ExecutionPlan>) -> Option<&DistributedQueryExec<LogicalPlanNode>> {
    if let Some(exec) = plan.downcast_ref::<DistributedQueryExec<LogicalPlanNode>>() {
        return Some(exec);
    }
    plan.children().into_iter().find_map(submitted_job)
}

/// The id the scheduler gave the job `plan` submitted, once it accepted it.
pub(crate) fn submitted_job_id(plan: &Arc<dyn ExecutionPlan>) -> Option<String> {
    submitted_job(plan)
        .and_then(|exec| exec.job_id())
        .map(|id| id.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real time: tokio's paused clock (`start_paused`) needs its `test-util` feature,
    // which the workspace does not build tokio with (a second feature set would
    // rebuild everything above tokio for the tests).
    #[tokio::test]
    async fn cancel_job_waits_15_seconds_for_an_answer_and_a_dashboard_poll_2_seconds() {
        let (_listener, mut client) = SchedulerClient::of_silent_scheduler();
        let started = tokio::time::Instant::now();
        let polled = client.job_stages("j1").await.unwrap_err();
        assert!(polled.contains("did not answer within 2s"), "{polled}");
        assert!(started.elapsed() < Duration::from_secs(CANCEL_TIMEOUT_SECS));

        let started = tokio::time::Instant::now();
        let cancelled = client.cancel_job("j1").await.unwrap_err();
        assert!(
            cancelled.contains("did not answer within 15s"),
            "{cancelled}"
        );
        assert!(started.elapsed() >= Duration::from_secs(CANCEL_TIMEOUT_SECS));
    }
}
