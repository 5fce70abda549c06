//! The cluster binaries start and document themselves.

use assert_cmd::Command;

#[test]
fn oxide_scheduler_help_lists_its_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
        .arg("--help")
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for flag in [
        "--bind-host",
        "--bind-port",
        "--scheduler-policy",
        "--placement",
        "--executor-timeout",
        "--no-executors-grace",
        "--task-max-failures",
        "--stage-max-failures",
        "--allowed-root",
        "--tls-ca",
        "--tls-cert",
        "--tls-key",
    ] {
        assert!(text.contains(flag), "{text}");
    }
}

#[test]
fn oxide_worker_help_lists_its_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-worker"))
        .arg("--help")
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for flag in [
        "--scheduler-host",
        "--scheduler-port",
        "--vcores",
        "--bind-host",
        "--work-dir",
        "--heartbeat-interval",
        "--tls-ca",
    ] {
        assert!(text.contains(flag), "{text}");
    }
}

#[test]
fn a_scheduler_timeout_a_busy_worker_cannot_meet_is_refused_before_listening() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
        .args(["--bind-port", "0", "--executor-timeout", "5"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure();
    let text = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        text.contains("--executor-timeout") && text.contains("5 s"),
        "{text}"
    );
}

#[test]
fn an_allowed_root_that_does_not_exist_is_refused_before_listening() {
    let missing = tempfile::tempdir().unwrap().path().join("no-such-lake");
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
        .args(["--bind-port", "0", "--allowed-root"])
        .arg(&missing)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure();
    let text = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        text.contains("--allowed-root")
            && text.contains("no-such-lake")
            && text.contains("must exist"),
        "{text}"
    );
}

#[test]
fn a_worker_refuses_a_shuffle_directory_other_users_can_enter() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Checked before the worker connects anywhere: no scheduler is needed.
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-worker"))
        .args(["--scheduler-port", "1", "--bind-port", "0", "--work-dir"])
        .arg(&shared)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure();
    let text = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(text.contains("chmod 700"), "{text}");
}

#[test]
fn oxide_version_says_which_build_it_is() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .arg("--version")
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    // Debug assertions are what tells the two apart (the dev and test profiles keep
    // them, release and fast drop them).
    let expected = if cfg!(debug_assertions) {
        "(dev build"
    } else {
        "(optimised build)"
    };
    assert!(
        text.starts_with(&format!("oxide {} {expected}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}

#[test]
fn a_worker_whose_flight_port_is_taken_exits_with_an_error_naming_it() {
    // A scheduler to register with: without one the worker would fail for that.
    let cluster = super::local_cluster::LocalCluster::start_with("cpu", 0, &[]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-worker"))
        .args(["--scheduler-port", &cluster.scheduler_port().to_string()])
        .args(["--bind-port", &port.to_string(), "--log", "warn"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure();
    let text = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        text.contains("Arrow Flight port") && text.contains(&format!("127.0.0.1:{port}")),
        "{text}"
    );
}

#[test]
fn a_scheduler_whose_port_is_taken_exits_with_an_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
        .args(["--bind-port", &port.to_string()])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure();
    let text = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(text.contains("in use"), "{text}");
}

/// The status code of a plain HTTP/1.1 `GET path` to 127.0.0.1:`port`, and the answer.
fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).to_string();
    let status = answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("not an HTTP/1.1 answer: {answer:?}"));
    (status, answer)
}

#[test]
fn the_scheduler_answers_healthz_over_http_and_an_unknown_path_with_404() {
    let cluster = super::local_cluster::LocalCluster::start_with("cpu", 0, &[]);
    let port = cluster.scheduler_port();
    let (status, answer) = http_get(port, "/healthz");
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = http_get(port, "/no-such-path");
    assert_eq!(status, 404, "{answer}");
}
