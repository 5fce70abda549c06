//! A cluster of real processes on 127.0.0.1: one `oxide-scheduler` and one
//! `oxide-worker` on ephemeral ports, stopped when the test ends however it ends.

use std::net::TcpStream;
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

/// The running scheduler and worker; dropping it kills both.
pub struct LocalCluster {
    processes: Vec<Child>,
    scheduler_port: u16,
    work_dir: tempfile::TempDir,
}

impl LocalCluster {
    /// Starts a scheduler placing plans for `placement` and one two-core worker, and
    /// returns once both listen.
    pub fn start(placement: &str) -> Self {
        let (scheduler_port, flight_port, grpc_port) = (free_port(), free_port(), free_port());
        let work_dir = tempfile::tempdir().unwrap();
        let mut cluster = Self {
            processes: Vec::new(),
            scheduler_port,
            work_dir,
        };
        cluster.processes.push(
            Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
                .args(["--bind-port", &scheduler_port.to_string()])
                .args(["--placement", placement, "--log", "warn"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for_port(scheduler_port);
        cluster.processes.push(
            Command::new(env!("CARGO_BIN_EXE_oxide-worker"))
                .args(["--scheduler-port", &scheduler_port.to_string()])
                .args(["--bind-port", &flight_port.to_string()])
                .args(["--bind-grpc-port", &grpc_port.to_string()])
                .args(["--vcores", "2", "--log", "warn", "--work-dir"])
                .arg(cluster.work_dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for_port(flight_port);
        cluster
    }

    /// `df://127.0.0.1:<port>` of the scheduler.
    pub fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.scheduler_port)
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for child in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
