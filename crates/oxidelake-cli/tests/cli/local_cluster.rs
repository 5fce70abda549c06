//! A cluster of real processes on 127.0.0.1: one `oxide-scheduler` and `oxide-worker`s
//! on ephemeral ports, stopped when the test ends however it ends.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// One worker process and the shuffle directory it was given.
struct Worker {
    child: Option<Child>,
    work_dir: PathBuf,
}

/// The running scheduler and workers; dropping it kills them all.
pub struct LocalCluster {
    scheduler: Child,
    scheduler_port: u16,
    workers: Vec<Worker>,
    scratch: tempfile::TempDir,
}

impl LocalCluster {
    /// Starts a scheduler placing plans for `placement` and one two-core worker, and
    /// returns once both listen.
    pub fn start(placement: &str) -> Self {
        Self::start_with(placement, 1, &[])
    }

    /// Starts a scheduler placing for `placement` with `scheduler_args` and `workers`
    /// two-core workers, and returns once all of them listen.
    pub fn start_with(placement: &str, workers: usize, scheduler_args: &[&str]) -> Self {
        let scheduler_port = free_port();
        let scheduler = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
            .args(["--bind-port", &scheduler_port.to_string()])
            .args(["--placement", placement, "--log", "warn"])
            .args(scheduler_args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut cluster = Self {
            scheduler,
            scheduler_port,
            workers: Vec::new(),
            scratch: tempfile::tempdir().unwrap(),
        };
        wait_for_port(scheduler_port);
        for _ in 0..workers {
            cluster.add_worker();
        }
        cluster
    }

    /// Starts one more worker (with a shuffle directory of its own) and returns its
    /// index once it listens.
    pub fn add_worker(&mut self) -> usize {
        let index = self.workers.len();
        let (flight_port, grpc_port) = (free_port(), free_port());
        let work_dir = self.scratch.path().join(format!("worker-{index}"));
        let child = Command::new(env!("CARGO_BIN_EXE_oxide-worker"))
            .args(["--scheduler-port", &self.scheduler_port.to_string()])
            .args(["--bind-port", &flight_port.to_string()])
            .args(["--bind-grpc-port", &grpc_port.to_string()])
            .args(["--vcores", "2", "--log", "warn", "--work-dir"])
            .arg(&work_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_port(flight_port);
        self.workers.push(Worker {
            child: Some(child),
            work_dir,
        });
        index
    }

    /// Kills worker `index` with SIGKILL and reaps it.
    pub fn kill_worker(&mut self, index: usize) {
        if let Some(mut child) = self.workers[index].child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// The shuffle directory of worker `index`.
    pub fn work_dir(&self, index: usize) -> &Path {
        &self.workers[index].work_dir
    }

    /// The scheduler's gRPC port.
    pub fn scheduler_port(&self) -> u16 {
        self.scheduler_port
    }

    /// `df://127.0.0.1:<port>` of the scheduler.
    pub fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.scheduler_port)
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let workers = self.workers.iter_mut().filter_map(|w| w.child.as_mut());
        for child in workers.chain(std::iter::once(&mut self.scheduler)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
