//! The dashboard's operator list for a query that runs on a Ballista cluster: the job
//! the client submitted (`DistributedQueryExec`) and, under it, every stage the cluster
//! completed, with the operators the executors ran and their metrics.
//!
//! The figures come from the scheduler (`GetJobMetrics`, through
//! [`SchedulerClient`]: one connection dialled as the session dials the scheduler).
//! Ballista 55 reports a stage there once it has completed, so while a job runs the
//! list grows stage by stage; what a running stage's tasks are doing is not reported
//! to clients.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ballista_core::serde::protobuf::{JobStageMetrics, OperatorMetricsSet, OperatorWithMetrics};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::MetricsSet;
use oxidelake_core::BackendKind;
use oxidelake_tui::{NodeStats, PlanNode};

use crate::OxideSession;
use crate::cluster::{SchedulerClient, submitted_job_id};

use super::plan_view::{backend_of, stats_of};

/// How often the scheduler is asked while the job runs.
const POLL: Duration = Duration::from_millis(500);

/// The job a cluster query submitted, followed through its scheduler.
pub(crate) struct ClusterJob {
    scheduler: SchedulerClient,
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
        Some(Self {
            scheduler: SchedulerClient::for_session(session)?,
            last_asked: None,
            job_id: None,
            stages: Vec::new(),
            problem: None,
        })
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
            self.job_id = submitted_job_id(plan);
        }
        let due = last || self.last_asked.is_none_or(|at| at.elapsed() >= POLL);
        if let (Some(job_id), true) = (self.job_id.clone(), due) {
            self.last_asked = Some(Instant::now());
            match self.scheduler.job_stages(&job_id).await {
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

    /// Cancels the job `plan` submitted, if the client knows its id: Ballista's client
    /// does not stop a job whose result stream is dropped, so a dashboard quit before
    /// the query finished would leave it running on the workers.
    pub(crate) async fn cancel(&mut self, plan: &Arc<dyn ExecutionPlan>) -> Result<(), String> {
        let Some(job_id) = submitted_job_id(plan) else {
            return Ok(());
        };
        self.scheduler.cancel_job(&job_id).await?;
        Ok(())
    }
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
