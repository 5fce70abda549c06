//! Ctrl-C on a statement that runs on a cluster cancels its job on the scheduler.
//!
//! Dropping the result stream only stops the client: Ballista's scheduler runs the job
//! to its end on the workers (issue 44: "Query cancelled." was printed, and the job
//! finished 8 s later). So the client asks the scheduler to cancel it, with the request
//! `oxide tui --cluster` sends when it is quit mid-query
//! ([`SchedulerClient::cancel_job`]), and says what the scheduler answered.
//!
//! The job's id reaches the client with the job's first status, a moment after the
//! submission; a Ctrl-C before that lets the query go on for up to [`JOB_ID_WAIT`] to
//! learn the id, so that a job the scheduler has just accepted is cancelled as well.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::ExecutionPlan;

use crate::cluster::{SchedulerClient, submitted_job_id};
use crate::{OxideSession, QueryStream};

/// How long a cancelled query may go on to learn its job's id.
const JOB_ID_WAIT: Duration = Duration::from_secs(5);

/// How often the job's id is looked for meanwhile.
const JOB_ID_POLL: Duration = Duration::from_millis(20);

/// A statement running on a cluster: the plan that submitted its job, and the way to
/// that job's scheduler.
pub(super) struct ClusterQuery {
    plan: Arc<dyn ExecutionPlan>,
    scheduler: SchedulerClient,
}

/// What became of a cancelled statement's job on the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum JobCancel {
    /// The scheduler cancelled the job.
    Cancelled {
        /// The scheduler's id of the job.
        job_id: String,
    },
    /// The scheduler answered that it did not cancel the job.
    NotCancelled {
        /// The scheduler's id of the job.
        job_id: String,
    },
    /// The scheduler could not be asked.
    Unanswered {
        /// The scheduler's id of the job.
        job_id: String,
        /// Why not.
        reason: String,
    },
    /// The scheduler never told the client the job's id.
    NoJobId,
}

impl std::fmt::Display for JobCancel {
    /// The line `oxide sql` prints on stderr after "Query cancelled.".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobCancel::Cancelled { job_id } => write!(f, "The scheduler cancelled job {job_id}."),
            JobCancel::NotCancelled { job_id } => write!(
                f,
                "warning: the scheduler answered that it did not cancel job {job_id}"
            ),
            JobCancel::Unanswered { job_id, reason } => write!(
                f,
                "warning: job {job_id} may still run on the cluster: cancelling it failed: {reason}"
            ),
            JobCancel::NoJobId => write!(
                f,
                "warning: the scheduler had not acknowledged the job within {} s; if it \
                 accepted it, the job runs to its end",
                JOB_ID_WAIT.as_secs()
            ),
        }
    }
}

impl ClusterQuery {
    /// The statement `stream` runs, when `session` is a cluster session and the stream
    /// comes from a submitted plan (not from an answer the client computed).
    pub(super) fn of(session: &OxideSession, stream: &QueryStream) -> Option<Self> {
        Some(Self {
            plan: Arc::clone(stream.plan()?),
            scheduler: SchedulerClient::for_session(session)?,
        })
    }

    /// Cancels the job on the scheduler. `query` is the statement's future, not yet
    /// finished: it is polled on (for at most [`JOB_ID_WAIT`]) while the job's id is
    /// unknown, and left alone once it finishes.
    pub(super) async fn cancel<F: Future>(mut self, mut query: Pin<&mut F>) -> JobCancel {
        let deadline = tokio::time::Instant::now() + JOB_ID_WAIT;
        let job_id = loop {
            if let Some(id) = submitted_job_id(&self.plan) {
                break Some(id);
            }
            if tokio::time::Instant::now() >= deadline {
                break None;
            }
            tokio::select! {
                _ = query.as_mut() => break submitted_job_id(&self.plan),
                () = tokio::time::sleep(JOB_ID_POLL) => {}
            }
        };
        let Some(job_id) = job_id else {
            return JobCancel::NoJobId;
        };
        match self.scheduler.cancel_job(&job_id).await {
            Ok(true) => JobCancel::Cancelled { job_id },
            Ok(false) => JobCancel::NotCancelled { job_id },
            Err(reason) => JobCancel::Unanswered {
                job_id,
                reason: format!("{} ({reason})", self.scheduler.endpoint()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_says_what_became_of_the_job() {
        let id = || "j1".to_string();
        assert_eq!(
            JobCancel::Cancelled { job_id: id() }.to_string(),
            "The scheduler cancelled job j1."
        );
        assert!(
            JobCancel::Unanswered {
                job_id: id(),
                reason: "gone".into()
            }
            .to_string()
            .contains("job j1 may still run on the cluster")
        );
        assert!(JobCancel::NoJobId.to_string().starts_with("warning: "));
    }

    #[tokio::test]
    async fn an_embedded_statement_has_no_cluster_job() {
        let session = OxideSession::local();
        let stream = session.sql_stream("SELECT 1").await.unwrap();
        assert!(ClusterQuery::of(&session, &stream).is_none());
    }
}
