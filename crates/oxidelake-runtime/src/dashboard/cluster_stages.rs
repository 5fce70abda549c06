//! The dashboard's operator list for a query that runs on a Ballista cluster: the job
//! the client submitted (`DistributedQueryExec`) and, under it, every stage the cluster
//! completed, with the operators the executors ran and their metrics.
//!
//! The figures come from the scheduler (`GetJobMetrics`, over one connection dialled
//! as the session dials the scheduler: through its TLS hook when it has one). Ballista 55 reports a stage there once it has completed, so
//! while a job runs the list grows stage by stage; what a running stage's tasks are
//! doing is not reported to clients.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ballista_core::execution_plans::DistributedQueryExec;
use ballista_core::extension::{BallistaConfigGrpcEndpoint, SessionConfigExt};
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::protobuf::{
    CancelJobParams, GetJobMetricsParams, JobStageMetrics, OperatorMetricsSet, OperatorWithMetrics,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion_proto::protobuf::LogicalPlanNode;
use oxidelake_core::BackendKind;
use oxidelake_tui::{NodeStats, PlanNode};
use tonic::transport::{Channel, Endpoint};

use crate::{OxideSession, SessionMode};

use super::plan_view::{backend_of, stats_of};

/// How often the scheduler is asked while the job runs.
const POLL: Duration = Duration::from_millis(500);

/// How long one request to the scheduler may take: a host that stopped answering must
/// not stall the dashboard's updates.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The job a cluster query submitted, followed through its scheduler.
pub(crate) struct ClusterJob {
    /// `http://host:port` of the scheduler.
    endpoint: String,
    /// The session's hook for dialling cluster members (TLS), if it has one.
    customize: Option<Arc<BallistaConfigGrpcEndpoint>>,
    /// The connection, once made; dropped after a failed request so the next one
    /// dials again.
    client: Option<SchedulerGrpcClient<Channel>>,
    last_asked: Option<Instant>,
    job_id: Option<String>,
    /// The stages last reported, kept when a later request fails.
    stages: Vec<JobStageMetrics>,
    /// Why the last request failed, if it did.
    problem: Option<String>,
}

impl ClusterJob {
    /// Follows a cluster session's job on its scheduler; `None` for an embedded session.
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
            last_asked: None,
            job_id: None,
            stages: Vec::new(),
            problem: None,
        })
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

    /// `call` with the scheduler's client, given up after [`REQUEST_TIMEOUT`]; a
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
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, request)
            .await
            .map_err(|_| format!("scheduler {endpoint} did not answer within {REQUEST_TIMEOUT:?}"))
            .and_then(|answer| answer);
        if answer.is_err() {
            self.client = None;
        }
        answer
    }

    /// Asks the scheduler for the job's completed stages (once the client knows the job
    /// id, at most every [`POLL`] unless `last`) and returns the operator list: the
    /// submitted job, then each stage.
    pub(crate) async fn nodes(
        &mut self,
        plan: &Arc<dyn ExecutionPlan>,
        last: bool,
    ) -> Vec<PlanNode> {
        if self.job_id.is_none() {
            self.job_id =
                submitted_job(plan).and_then(|exec| exec.job_id().map(|id| id.into_inner()));
        }
        let due = last || self.last_asked.is_none_or(|at| at.elapsed() >= POLL);
        if let (Some(job_id), true) = (self.job_id.clone(), due) {
            self.last_asked = Some(Instant::now());
            match self.fetch(&job_id).await {
                Ok(stages) => {
                    self.stages = stages;
                    self.problem = None;
                }
                Err(problem) => self.problem = Some(problem),
            }
        }
        job_nodes(
            self.job_id.as_deref(),
            &self.stages,
            self.problem.as_deref(),
        )
    }

    async fn fetch(&mut self, job_id: &str) -> Result<Vec<JobStageMetrics>, String> {
        let job_id = job_id.to_string();
        let answer = self
            .ask(|mut client| async move {
                client.get_job_metrics(GetJobMetricsParams { job_id }).await
            })
            .await?;
        Ok(answer.into_inner().stages)
    }

    /// Cancels the job `plan` submitted, if the client knows its id: Ballista's client
    /// does not stop a job whose result stream is dropped, so a dashboard quit before
    /// the query finished would leave it running on the workers.
    pub(crate) async fn cancel(&mut self, plan: &Arc<dyn ExecutionPlan>) -> Result<(), String> {
        let Some(job_id) = submitted_job(plan).and_then(|exec| exec.job_id()) else {
            return Ok(());
        };
        let job_id = job_id.into_inner();
        self.ask(|mut client| async move { client.cancel_job(CancelJobParams { job_id }).await })
            .await?;
        Ok(())
    }
}

/// The `DistributedQueryExec` at or under the root of `plan` (EXPLAIN ANALYZE wraps it).
fn submitted_job(plan: &Arc<dyn ExecutionPlan>) -> Option<&DistributedQueryExec<LogicalPlanNode>> {
    if let Some(exec) = plan.downcast_ref::<DistributedQueryExec<LogicalPlanNode>>() {
        return Some(exec);
    }
    plan.children().into_iter().find_map(submitted_job)
}

/// The operator list: a root row for the job, then each completed stage as a row with
/// its operators indented under it.
fn job_nodes(
    job_id: Option<&str>,
    stages: &[JobStageMetrics],
    problem: Option<&str>,
) -> Vec<PlanNode> {
    let mut detail = match job_id {
        None => "submitting the job to the scheduler".to_string(),
        Some(id) => format!("job {id}: {} stages completed on the cluster", stages.len()),
    };
    if let Some(problem) = problem {
        detail.push_str(&format!(" (stage figures unavailable: {problem})"));
    }
    let mut nodes = vec![PlanNode {
        depth: 0,
        name: "DistributedQueryExec".to_string(),
        detail,
        backend: BackendKind::CpuSimd,
        stats: NodeStats::default(),
    }];
    for stage in stages {
        let operators: Vec<PlanNode> = stage.operators.iter().map(operator_node).collect();
        let root = operators.first();
        nodes.push(PlanNode {
            depth: 1,
            name: format!("Stage {}", stage.stage_id),
            detail: format!("{} partitions, completed", stage.partitions),
            backend: root.map_or(BackendKind::CpuSimd, |n| n.backend),
            stats: root.map(|n| n.stats.clone()).unwrap_or_default(),
        });
        nodes.extend(operators);
    }
    nodes
}

fn operator_node(operator: &OperatorWithMetrics) -> PlanNode {
    let line = operator.operator_desc.trim_end();
    let metrics: MetricsSet = OperatorMetricsSet {
        metrics: operator.metrics.clone(),
    }
    .try_into()
    .unwrap_or_default();
    PlanNode {
        depth: operator.depth as usize + 2,
        name: operator.operator_type.clone(),
        detail: line
            .split_once(": ")
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default(),
        backend: backend_of(line),
        stats: stats_of(&metrics),
    }
}

#[cfg(test)]
mod tests {
    use ballista_core::serde::protobuf::{OperatorMetric, operator_metric};

    use super::*;

    fn operator(depth: u32, name: &str, desc: &str, rows: u64) -> OperatorWithMetrics {
        OperatorWithMetrics {
            depth,
            operator_type: name.to_string(),
            operator_desc: desc.to_string(),
            metrics: vec![OperatorMetric {
                partition: Some(0),
                metric: Some(operator_metric::Metric::OutputRows(rows)),
            }],
        }
    }

    #[test]
    fn each_completed_stage_is_a_row_with_its_operators_indented_under_it() {
        let stages = vec![
            JobStageMetrics {
                stage_id: 1,
                partitions: 2,
                operators: vec![
                    operator(0, "ShuffleWriterExec", "ShuffleWriterExec: partitions=2", 7),
                    operator(
                        1,
                        "GpuHashAggregateExec",
                        "GpuHashAggregateExec[cuda]: mode=Partial",
                        7,
                    ),
                ],
            },
            JobStageMetrics {
                stage_id: 2,
                partitions: 1,
                operators: vec![operator(
                    0,
                    "ShuffleWriterExec",
                    "ShuffleWriterExec: partitions=1",
                    3,
                )],
            },
        ];
        let nodes = job_nodes(Some("abc"), &stages, None);
        let rows: Vec<(usize, &str)> = nodes.iter().map(|n| (n.depth, n.name.as_str())).collect();
        assert_eq!(
            rows,
            [
                (0, "DistributedQueryExec"),
                (1, "Stage 1"),
                (2, "ShuffleWriterExec"),
                (3, "GpuHashAggregateExec"),
                (1, "Stage 2"),
                (2, "ShuffleWriterExec"),
            ]
        );
        assert_eq!(
            nodes[0].detail,
            "job abc: 2 stages completed on the cluster"
        );
        assert_eq!(nodes[1].detail, "2 partitions, completed");
        assert_eq!(nodes[3].backend, BackendKind::Cuda);
        assert_eq!(nodes[3].detail, "mode=Partial");
        assert_eq!(nodes[3].stats.rows_out, 7);
        assert_eq!(
            nodes[1].stats.rows_out, 7,
            "a stage row shows its root's figures"
        );
    }

    #[test]
    fn before_the_job_id_is_known_the_list_says_the_job_is_being_submitted() {
        let nodes = job_nodes(None, &[], None);
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].detail, "submitting the job to the scheduler");
    }

    #[test]
    fn a_failed_request_keeps_the_stages_and_says_why_figures_are_missing() {
        let nodes = job_nodes(Some("j"), &[], Some("scheduler gone"));
        assert!(
            nodes[0]
                .detail
                .ends_with("(stage figures unavailable: scheduler gone)")
        );
    }
}
