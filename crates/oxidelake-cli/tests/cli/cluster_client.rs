//! `oxide sql --cluster` never waits forever and never leaves a job behind (issue 44):
//! a query whose scheduler stops answering mid-run (SIGSTOP) fails with an error line
//! within 30 s, and a query cancelled with Ctrl-C is cancelled on the scheduler too.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::local_cluster::LocalCluster;
use crate::generated::tpch_data;

/// A join and a grouped aggregate over TPC-H SF 1: several seconds on a debug build,
/// so the test acts while the job runs.
const QUERY: &str = "SELECT o_orderpriority, COUNT(*) AS n, SUM(l_quantity) AS q \
                     FROM orders JOIN lineitem ON o_orderkey = l_orderkey \
                     GROUP BY o_orderpriority ORDER BY o_orderpriority";

/// An `oxide sql --cluster` process, killed if the test ends before it does.
struct Client(Option<Child>);

impl Client {
    /// Starts [`QUERY`] on `cluster` over the tables in `data`.
    fn start(cluster: &LocalCluster, data: &Path) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_oxide"))
            .args([
                "sql",
                "--format",
                "csv",
                "--cluster",
                &cluster.url(),
                "--data",
            ])
            .arg(data)
            .args(["-c", QUERY])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self(Some(child))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Returns once worker 0 has written shuffle output for the query's job; fails if
    /// the query ends first (the test would not act on a running job).
    fn wait_until_the_job_runs(&mut self, cluster: &LocalCluster) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !cluster.shuffle_output_written(0) {
            assert!(
                self.child().try_wait().unwrap().is_none(),
                "the query ended before its job ran on the worker"
            );
            assert!(Instant::now() < deadline, "the worker got no task");
            std::thread::park_timeout(Duration::from_millis(20));
        }
        assert!(
            self.child().try_wait().unwrap().is_none(),
            "the query ended as its job started"
        );
    }

    /// Sends the client `signal` with kill(1).
    fn signal(&mut self, signal: &str) {
        let pid = self.child().id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// The client's output once it ends by itself within `limit`; `None` (and the
    /// client killed) when it does not.
    fn output_within(mut self, limit: Duration) -> Option<Output> {
        let deadline = Instant::now() + limit;
        while self.child().try_wait().unwrap().is_none() {
            if Instant::now() >= deadline {
                return None; // killed by drop
            }
            std::thread::park_timeout(Duration::from_millis(50));
        }
        self.0.take().map(|child| child.wait_with_output().unwrap())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Whether the scheduler's log (at `info`) shows a job that ended: finished, failed or
/// cancelled.
fn a_job_ended(scheduler_log: &str) -> bool {
    [
        "Job finished successfully: [",
        "Job failed: [",
        "Job cancelled: [",
    ]
    .iter()
    .any(|line| scheduler_log.contains(line))
}

#[test]
fn a_cluster_query_fails_within_30_seconds_when_the_scheduler_stops_answering() {
    let data = tpch_data(1.0);
    let cluster = LocalCluster::start_with("cpu", 1, &["--log", "info"]);
    let mut client = Client::start(&cluster, data.path());
    client.wait_until_the_job_runs(&cluster);
    cluster.signal_scheduler("STOP");
    let stopped_at = Instant::now();
    // A stopped scheduler logs nothing more: its log says the job was still running
    // when it stopped, so the client below waits on a job that needs the scheduler.
    let log = cluster.scheduler_log();
    assert!(
        log.contains("Job submitted: ["),
        "no job was submitted:\n{log}"
    );
    assert!(
        !a_job_ended(&log),
        "the job ended before the scheduler stopped:\n{log}"
    );
    let output = client.output_within(Duration::from_secs(60));
    let waited = stopped_at.elapsed();
    cluster.signal_scheduler("CONT");
    let output = output.unwrap_or_else(|| {
        panic!("the client still waited {waited:?} after the scheduler stopped")
    });
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        waited <= Duration::from_secs(30),
        "the error came {waited:?} after the scheduler stopped:\n{stderr}"
    );
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: "), "{stderr}");
}

#[test]
fn ctrl_c_on_a_cluster_query_cancels_its_job_on_the_scheduler() {
    let data = tpch_data(1.0);
    let cluster = LocalCluster::start_with("cpu", 1, &["--log", "info"]);
    let mut client = Client::start(&cluster, data.path());
    client.wait_until_the_job_runs(&cluster);
    client.signal("INT");
    let output = client
        .output_within(Duration::from_secs(30))
        .expect("the client ended after Ctrl-C");
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Query cancelled."), "{stderr}");
    // The client names the job the scheduler said it cancelled...
    let job_id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("The scheduler cancelled job "))
        .map(|rest| rest.trim_end_matches('.').to_string())
        .unwrap_or_else(|| panic!("no cancellation reported:\n{stderr}"));
    // ...and the scheduler's log has it cancelled (its event loop logs it a moment
    // after answering).
    let cancelled = format!("Job cancelled: [{job_id}]");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cluster.scheduler_log().contains(&cancelled) {
        assert!(
            Instant::now() < deadline,
            "the scheduler did not cancel job {job_id}:\n{}",
            cluster.scheduler_log()
        );
        std::thread::park_timeout(Duration::from_millis(100));
    }
    assert!(
        !cluster
            .scheduler_log()
            .contains(&format!("Job finished successfully: [{job_id}]")),
        "{}",
        cluster.scheduler_log()
    );
}
