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
//! Meanwhile its rows are taken and dropped (the user has been told "Query
//! cancelled.", so none is printed). The scheduler then gets up to
//! `CANCEL_TIMEOUT_SECS` (15 s) to answer. A second Ctrl-C ends either wait at once.

use std::future::Future;
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
    /// A second Ctrl-C ended the wait for the job's id.
    WaitInterrupted,
    /// A second Ctrl-C ended the wait for the scheduler's answer to the cancel request.
    AnswerInterrupted {
        /// The scheduler's id of the job.
        job_id: String,
    },
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
            JobCancel::WaitInterrupted => write!(
                f,
                "warning: a second Ctrl-C ended the wait for the job's id; if the \
                 scheduler accepted the job, it runs to its end"
            ),
            JobCancel::AnswerInterrupted { job_id } => write!(
                f,
                "warning: a second Ctrl-C ended the wait for the scheduler's answer; \
                 job {job_id} may still run on the cluster"
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

    /// Cancels the job on the scheduler. `stream` is the statement's result, not yet
    /// finished: while the job's id is unknown it is polled on (for at most
    /// [`JOB_ID_WAIT`]) and its rows dropped, until it ends or `interrupt` (the next
    /// Ctrl-C) resolves; `interrupt` also ends the wait for the scheduler's answer.
    pub(super) async fn cancel(
        mut self,
        stream: &mut QueryStream,
        interrupt: impl Future<Output = ()>,
    ) -> JobCancel {
        let mut interrupt = std::pin::pin!(interrupt);
        let job_id = match wait_for_job_id(&self.plan, stream, interrupt.as_mut()).await {
            Ok(job_id) => job_id,
            Err(unknown) => return unknown,
        };
        ask_to_cancel(&mut self.scheduler, job_id, interrupt).await
    }
}

/// Asks `scheduler` to cancel job `job_id` and says what it answered, or
/// [`JobCancel::AnswerInterrupted`] at once when `interrupt` resolves first.
async fn ask_to_cancel(
    scheduler: &mut SchedulerClient,
    job_id: String,
    interrupt: impl Future<Output = ()>,
) -> JobCancel {
    let endpoint = scheduler.endpoint().to_string();
    let answer = tokio::select! {
        biased;
        () = interrupt => None,
        answer = scheduler.cancel_job(&job_id) => Some(answer),
    };
    let Some(answer) = answer else {
        return JobCancel::AnswerInterrupted { job_id };
    };
    match answer {
        Ok(true) => JobCancel::Cancelled { job_id },
        Ok(false) => JobCancel::NotCancelled { job_id },
        Err(reason) => JobCancel::Unanswered {
            job_id,
            reason: format!("{endpoint} ({reason})"),
        },
    }
}

/// The id of the job `plan` submitted, once the plan learns it, while `stream` (its
/// result) is polled on and its rows dropped: [`JobCancel::NoJobId`] when it does not
/// within [`JOB_ID_WAIT`] or the stream ends first, [`JobCancel::WaitInterrupted`] at
/// once when `interrupt` resolves.
async fn wait_for_job_id(
    plan: &Arc<dyn ExecutionPlan>,
    stream: &mut QueryStream,
    interrupt: impl Future<Output = ()>,
) -> Result<String, JobCancel> {
    let deadline = tokio::time::Instant::now() + JOB_ID_WAIT;
    let mut interrupt = std::pin::pin!(interrupt);
    loop {
        if let Some(id) = submitted_job_id(plan) {
            return Ok(id);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(JobCancel::NoJobId);
        }
        tokio::select! {
            biased;
            () = &mut interrupt => return Err(JobCancel::WaitInterrupted),
            batch = stream.next() => {
                // Rows are dropped: the statement was cancelled. Its end (or an error)
                // means no status will come any more.
                if !matches!(batch, Some(Ok(_))) {
                    return submitted_job_id(plan).ok_or(JobCancel::NoJobId);
                }
            }
            () = tokio::time::sleep(JOB_ID_POLL) => {}
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
        assert!(
            JobCancel::WaitInterrupted
                .to_string()
                .starts_with("warning: a second Ctrl-C")
        );
    }

    /// A statement's stream and plan (its plan submits no job: the id never comes).
    async fn running(sql: &str) -> (QueryStream, Arc<dyn ExecutionPlan>) {
        let stream = OxideSession::local().sql_stream(sql).await.unwrap();
        let plan = Arc::clone(stream.plan().unwrap());
        (stream, plan)
    }

    #[tokio::test]
    async fn a_second_ctrl_c_ends_the_wait_for_the_job_id_at_once() {
        let (mut stream, plan) = running("SELECT * FROM generate_series(1, 1000000000)").await;
        let started = std::time::Instant::now();
        let waited = wait_for_job_id(&plan, &mut stream, std::future::ready(())).await;
        assert_eq!(waited, Err(JobCancel::WaitInterrupted));
        assert!(
            started.elapsed() < JOB_ID_WAIT / 5,
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn rows_are_taken_and_dropped_while_the_job_id_is_awaited_until_the_stream_ends() {
        let (mut stream, plan) = running("SELECT * FROM generate_series(1, 100000)").await;
        let started = std::time::Instant::now();
        let waited = wait_for_job_id(&plan, &mut stream, std::future::pending()).await;
        assert_eq!(waited, Err(JobCancel::NoJobId));
        // Only the stream's end stops this wait early: every row was taken.
        assert!(started.elapsed() < JOB_ID_WAIT, "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_second_ctrl_c_ends_the_wait_for_the_schedulers_answer_at_once() {
        let (_listener, mut scheduler) = SchedulerClient::of_silent_scheduler();
        let started = std::time::Instant::now();
        // The second Ctrl-C comes while the request waits for an answer that never
        // comes (the scheduler would get 15 s).
        let ctrl_c = tokio::time::sleep(Duration::from_millis(200));
        let answer = ask_to_cancel(&mut scheduler, "j1".into(), ctrl_c).await;
        assert_eq!(
            answer,
            JobCancel::AnswerInterrupted {
                job_id: "j1".into()
            }
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            answer
                .to_string()
                .starts_with("warning: a second Ctrl-C ended the wait for the scheduler's answer"),
            "{answer}"
        );
        assert!(
            answer.to_string().contains("job j1 may still run"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn an_embedded_statement_has_no_cluster_job() {
        let session = OxideSession::local();
        let stream = session.sql_stream("SELECT 1").await.unwrap();
        assert!(ClusterQuery::of(&session, &stream).is_none());
    }
}
