//! The `oxide sql` prompt driven through a real pseudo-terminal with termlens: the
//! `\d` command, Ctrl-C cancelling a running query without leaving, and a multi-line
//! statement recalled whole from history.

use std::path::Path;
use std::time::Duration;

use termlens::{Key, Terminal};

const WAIT: Duration = Duration::from_secs(30);

/// `oxide sql ARGS…` at a 120×40 prompt in `dir`, with only HOME (for the history file)
/// in its environment.
fn prompt(dir: &Path, args: &[&str]) -> termlens::Result<Terminal> {
    Terminal::builder()
        .size(120, 40)
        .env_clear()
        .env("HOME", dir)
        .current_dir(dir)
        .timeout(WAIT)
        .arg("sql")
        .args(args)
        .spawn(env!("CARGO_BIN_EXE_oxide"))
}

fn lake(dir: &Path) {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["gen-data", "--rows", "1000", "--out"])
        .arg(dir.join("lake"))
        .assert()
        .success();
}

fn type_line(t: &mut Terminal, line: &str) -> termlens::Result<()> {
    t.send_str(line)?;
    t.send(Key::Enter)
}

#[test]
fn backslash_d_at_the_prompt_lists_the_tables() -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    lake(dir.path());
    let mut t = prompt(dir.path(), &["--data", "lake"])?;
    t.wait_until(|s| s.contains("oxide>"))?;
    type_line(&mut t, "\\d")?;
    t.wait_until(|s| s.contains("BASE TABLE") && s.contains("1 row fetched"))?;
    let screen = t.screen();
    assert!(
        screen.contains("| public       | t          | BASE TABLE |"),
        "{screen}"
    );
    type_line(&mut t, "\\q")?;
    assert_eq!(t.wait_exit()?.code(), Some(0));
    Ok(())
}

#[test]
fn ctrl_c_cancels_a_running_query_and_the_prompt_stays() -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let mut t = prompt(dir.path(), &[])?;
    t.wait_until(|s| s.contains("oxide>"))?;
    type_line(
        &mut t,
        "SELECT COUNT(*) FROM generate_series(1, 1000000000000);",
    )?;
    std::thread::sleep(Duration::from_secs(2));
    t.send(Key::Ctrl('c'))?;
    t.wait_until(|s| s.contains("Query cancelled."))?;
    // Still at the prompt: the next statement runs.
    type_line(&mut t, "SELECT 40 + 2 AS answer;")?;
    t.wait_until(|s| s.contains("| 42     |"))?;
    // Ctrl-C twice at an empty prompt leaves. Wait for that prompt (the third): a Ctrl-C
    // sent while the statement is still printing its footer goes to the statement.
    t.wait_until(|s| s.to_string().matches("oxide>").count() == 3)?;
    t.send(Key::Ctrl('c'))?;
    t.wait_until(|s| s.contains("Ctrl-C again"))?;
    // And for the prompt after the hint: between two prompts the terminal is not in raw
    // mode, and a Ctrl-C there is a signal to the process (exit 130), not a key.
    t.wait_until(|s| s.to_string().matches("oxide>").count() == 4)?;
    t.send(Key::Ctrl('c'))?;
    assert_eq!(t.wait_exit()?.code(), Some(0));
    Ok(())
}

#[test]
fn a_multi_line_statement_comes_back_whole_from_history() -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let mut t = prompt(dir.path(), &[])?;
    t.wait_until(|s| s.contains("oxide>"))?;
    type_line(&mut t, "SELECT 6")?;
    t.wait_until(|s| s.contains("  ->"))?;
    type_line(&mut t, "  * 7 AS answer;")?;
    t.wait_until(|s| s.contains("1 row fetched"))?;
    // One Up recalls both lines; Enter runs the statement again.
    t.send(Key::Up)?;
    t.wait_until(|s| {
        s.contains("* 7 AS answer;") && s.to_string().matches("SELECT 6").count() == 2
    })?;
    t.send(Key::Enter)?;
    t.wait_until(|s| s.to_string().matches("1 row fetched").count() == 2)?;
    let screen = t.screen();
    assert_eq!(
        screen.to_string().matches("| 42     |").count(),
        2,
        "{screen}"
    );
    type_line(&mut t, "\\q")?;
    assert_eq!(t.wait_exit()?.code(), Some(0));
    Ok(())
}
