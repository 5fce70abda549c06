//! `oxide table`, `oxide insert` and `oxide objects`: the SDK's commands linked into the
//! `oxide` binary, end to end, and listed in its help.

use assert_cmd::Command;

use crate::lake::{INSERT, bytes};

#[test]
fn oxide_help_lists_the_managed_object_commands() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .arg("--help")
        .assert()
        .success();
    let help = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for command in ["table", "insert", "objects"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(command)),
            "{command} missing from:\n{help}"
        );
    }
}

#[test]
fn the_command_line_creates_inserts_reads_back_verifies_and_collects() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let data_arg = data.display().to_string();
    let payload = bytes(1_500_000, 5);
    let file = dir.path().join("ep42.mcap");
    std::fs::write(&file, &payload).unwrap();

    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args([
            "table",
            "--data-dir",
            &data_arg,
            "create",
            "robots.episodes",
            "id:int64!, episode:file",
        ])
        .assert()
        .success();
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["insert", "--data-dir", &data_arg, INSERT, "42"])
        .arg(format!("@{}", file.display()))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        text.contains("(version 1)") && text.contains("application/x-mcap"),
        "{text}"
    );
    let digest = text.split("sha256 ").nth(1).unwrap().trim().to_string();

    let cat = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["objects", "--data-dir", &data_arg, "cat", &digest])
        .assert()
        .success();
    assert_eq!(cat.get_output().stdout, payload);
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["objects", "--data-dir", &data_arg, "verify"])
        .assert()
        .success()
        .stdout("1 referenced objects verified\n");
    // A refused statement: one error line, nothing uploaded.
    let refused = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args([
            "insert",
            "--data-dir",
            &data_arg,
            "INSERT INTO robots.episodes (id, episode) VALUES (?, 7)",
            "1",
        ])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).to_string();
    assert!(
        stderr.starts_with("error: unsupported statement"),
        "{stderr}"
    );
    let gc = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args([
            "objects",
            "--data-dir",
            &data_arg,
            "gc",
            "--retention-hours",
            "0",
            "--force",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&gc.get_output().stdout).to_string();
    assert!(
        text.contains("kept 1 referenced") && text.contains("deleted 0 objects"),
        "{text}"
    );
}
