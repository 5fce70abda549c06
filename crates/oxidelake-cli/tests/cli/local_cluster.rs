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

/// One worker process and the shuffle directory it was given, if any.
struct Worker {
    child: Option<Child>,
    work_dir: Option<PathBuf>,
    flight_port: u16,
}

/// The running scheduler and workers; dropping it kills them all.
pub struct LocalCluster {
    scheduler: Child,
    scheduler_port: u16,
    workers: Vec<Worker>,
    worker_args: Vec<String>,
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
        Self::start_with_args(placement, workers, scheduler_args, &[])
    }

    /// [`LocalCluster::start_with`], every worker (also those added later) started with
    /// `worker_args` as well.
    pub fn start_with_args(
        placement: &str,
        workers: usize,
        scheduler_args: &[&str],
        worker_args: &[&str],
    ) -> Self {
        let scheduler_port = free_port();
        let scratch = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(scratch.path().join("scheduler.log")).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"));
        command
            .args(["--bind-port", &scheduler_port.to_string()])
            .args(["--placement", placement])
            .args(scheduler_args)
            .stdout(Stdio::null())
            .stderr(log);
        if !scheduler_args.contains(&"--log") {
            command.args(["--log", "warn"]);
        }
        let mut cluster = Self {
            scheduler: command.spawn().unwrap(),
            scheduler_port,
            workers: Vec::new(),
            worker_args: worker_args.iter().map(|a| a.to_string()).collect(),
            scratch,
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
        let work_dir = self
            .scratch
            .path()
            .join(format!("worker-{}", self.workers.len()));
        self.add_worker_with(Some(work_dir), &[])
    }

    /// Starts one more worker with `--work-dir` when given (else its default) and the
    /// environment variables `env`, and returns its index once it listens.
    pub fn add_worker_with(&mut self, work_dir: Option<PathBuf>, env: &[(&str, &Path)]) -> usize {
        let (flight_port, grpc_port) = (free_port(), free_port());
        let mut command = Command::new(env!("CARGO_BIN_EXE_oxide-worker"));
        command
            .args(["--scheduler-port", &self.scheduler_port.to_string()])
            .args(["--bind-port", &flight_port.to_string()])
            .args(["--bind-grpc-port", &grpc_port.to_string()])
            .args(["--vcores", "2", "--log", "warn"])
            .args(&self.worker_args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(dir) = &work_dir {
            command.arg("--work-dir").arg(dir);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        self.workers.push(Worker {
            child: Some(command.spawn().unwrap()),
            work_dir,
            flight_port,
        });
        wait_for_port(flight_port);
        self.workers.len() - 1
    }

    /// Stops worker `index` with SIGTERM, as a service manager does, and returns how
    /// it exited.
    pub fn terminate_worker(&mut self, index: usize) -> std::process::ExitStatus {
        let mut child = self.workers[index].child.take().unwrap();
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        child.wait().unwrap()
    }

    /// Kills worker `index` with SIGKILL and reaps it.
    pub fn kill_worker(&mut self, index: usize) {
        if let Some(mut child) = self.workers[index].child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// The Arrow Flight port (shuffle data, results) of worker `index`.
    pub fn flight_port(&self, index: usize) -> u16 {
        self.workers[index].flight_port
    }

    /// The shuffle directory worker `index` was given.
    pub fn work_dir(&self, index: usize) -> &Path {
        self.workers[index].work_dir.as_deref().unwrap()
    }

    /// What the scheduler has logged so far (its stderr; `--log LEVEL` among the
    /// scheduler's arguments sets the level, `warn` otherwise).
    pub fn scheduler_log(&self) -> String {
        std::fs::read_to_string(self.scratch.path().join("scheduler.log")).unwrap_or_default()
    }

    /// `df://127.0.0.1:<port>` of the scheduler.
    pub fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.scheduler_port)
    }

    /// The scheduler's gRPC port.
    pub fn scheduler_port(&self) -> u16 {
        self.scheduler_port
    }

    /// Sends the scheduler `signal` (`STOP`, `CONT`, ...) with kill(1).
    pub fn signal_scheduler(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.scheduler.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// Whether worker `index` has written shuffle output for a job (a job directory
    /// holding a file; DataFusion's own spill directories do not count).
    pub fn shuffle_output_written(&self, index: usize) -> bool {
        fn holds_a_file(dir: &Path) -> bool {
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries.filter_map(Result::ok).any(|e| {
                    let path = e.path();
                    !path.is_dir() || holds_a_file(&path)
                })
            })
        }
        std::fs::read_dir(self.work_dir(index)).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                let path = e.path();
                path.is_dir()
                    && !e.file_name().to_string_lossy().starts_with("datafusion")
                    && holds_a_file(&path)
            })
        })
    }
}

impl Drop for LocalCluster {
    /// SIGKILL ends a stopped (SIGSTOP) process as well.
    fn drop(&mut self) {
        let workers = self.workers.iter_mut().filter_map(|w| w.child.as_mut());
        for child in workers.chain(std::iter::once(&mut self.scheduler)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
