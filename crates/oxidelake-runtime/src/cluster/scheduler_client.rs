//! The client's own requests to its scheduler, beside the job Ballista submits: the
//! stage figures `oxide tui --cluster` shows (`GetJobMetrics`) and `CancelJob` when a
//! query is stopped early.
//!
//! Ballista's client does not cancel a job whose result stream is dropped: a query the
//! user stopped (Ctrl-C in `oxide sql`, q in `oxide tui`) would run to its end on the
//! workers unless the client asks the scheduler to cancel it. One connection is dialled
//! as the session dials the scheduler (through its hook: TLS, deadline, liveness check),
//! and every request is bounded by [`ANSWER_TIMEOUT`], so a scheduler that stopped
//! answering costs the caller at most that long.

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

/// How long one of these requests may take: they serve a user who is watching (a
/// dashboard refresh) or leaving (a cancelled query), not a query's result.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

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

    /// `call` with the scheduler's client, given up after [`ANSWER_TIMEOUT`]; a
    /// failure drops the connection so the next request dials again.
    async fn ask<T, F, Fut>(&mut self, call: F) -> Result<T, String>
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
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, request)
            .await
            .map_err(|_| format!("scheduler {endpoint} did not answer within {ANSWER_TIMEOUT:?}"))
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
            .ask(|mut client| async move {
                client.get_job_metrics(GetJobMetricsParams { job_id }).await
            })
            .await?;
        Ok(answer.into_inner().stages)
    }

    /// Asks the scheduler to cancel job `job_id`; returns whether it says it did.
    pub(crate) async fn cancel_job(&mut self, job_id: &str) -> Result<bool, String> {
        let job_id = job_id.to_string();
        let answer = self
            .ask(|mut client| async move { client.cancel_job(CancelJobParams { job_id }).await })
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
