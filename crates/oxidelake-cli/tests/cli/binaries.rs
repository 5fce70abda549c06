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
    ] {
        assert!(text.contains(flag), "{text}");
    }
}
