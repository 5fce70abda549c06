//! Arguments that are not UTF-8 (issue 44: `std::env::args` panicked, exit 101): file
//! names are used byte for byte, and a value that must be text is refused in one error
//! line naming its flag.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use assert_cmd::Command;

use crate::lake::{INSERT, bytes};

#[test]
fn a_statement_that_is_not_utf8_is_refused_in_one_line_naming_its_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["sql", "-c"])
        .arg(OsStr::from_bytes(b"SELECT '\xff'"))
        .assert()
        .failure()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: the value of -c is not UTF-8 text") && stderr.contains("\\xFF"),
        "{stderr}"
    );
}

#[test]
fn a_cluster_member_names_the_flag_whose_value_is_not_utf8() {
    for binary in [
        env!("CARGO_BIN_EXE_oxide-scheduler"),
        env!("CARGO_BIN_EXE_oxide-worker"),
    ] {
        let out = Command::new(binary)
            .arg("--bind-host")
            .arg(OsStr::from_bytes(b"127.0.0.\xff"))
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .failure()
            .code(1);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            stderr.contains("the value of --bind-host is not UTF-8 text"),
            "{binary}: {stderr}"
        );
    }
}

// Linux file systems take any bytes but `/` and NUL in a name (macOS's do not).
#[cfg(target_os = "linux")]
#[test]
fn an_at_path_whose_file_name_is_not_utf8_is_uploaded_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lake");
    let payload = bytes(100_000, 7);
    let file = dir.path().join(OsStr::from_bytes(b"take\xff#2.bin"));
    std::fs::write(&file, &payload).unwrap();
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["table", "--data-dir"])
        .arg(&data)
        .args(["create", "robots.episodes", "id:int64!, episode:file"])
        .assert()
        .success();
    let mut at_path = OsString::from("@");
    at_path.push(&file);
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["insert", "--data-dir"])
        .arg(&data)
        .args([INSERT, "42"])
        .arg(&at_path)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("(version 1)"), "{text}");
    let digest = text.split("sha256 ").nth(1).unwrap().trim().to_string();
    let cat = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["objects", "--data-dir"])
        .arg(&data)
        .args(["cat", &digest])
        .assert()
        .success();
    assert_eq!(cat.get_output().stdout, payload);
}
