//! Every command in the README's `sh` blocks runs as written: the `oxide` ones are run
//! here (in a scratch directory, in README order), `cargo test` ones are what is running
//! this test. A command of any other shape fails the test, so new README commands get
//! covered or moved to a `console` block (commands that run until stopped).

use std::time::Duration;

use assert_cmd::Command;

const OXIDE: &str = "cargo run -p oxidelake-cli --bin oxide -- ";

/// Lines of the README's ```sh blocks.
fn sh_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            continue;
        }
        if in_sh && !trimmed.is_empty() && !trimmed.starts_with('#') {
            commands.push(trimmed.to_string());
        }
    }
    commands
}

/// Splits a command line like a POSIX shell does for plain and double-quoted words.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut in_word) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn every_readme_command_runs_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let commands = sh_commands(&readme);
    assert!(
        commands.iter().any(|c| c.ends_with("-- demo")),
        "{commands:?}"
    );
    let scratch = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for command in &commands {
        if let Some(args) = command.strip_prefix(OXIDE) {
            let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
                .args(words(args))
                .current_dir(scratch.path())
                .timeout(Duration::from_secs(300))
                .assert()
                .success();
            let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
            assert!(
                !stdout.trim().is_empty() || args.starts_with("gen-data"),
                "{command}"
            );
            ran += 1;
        } else {
            assert!(
                command.starts_with("cargo test --workspace"),
                "README command this test cannot run: {command}"
            );
        }
    }
    println!(
        "readme: {ran} oxide commands ran, {} listed",
        commands.len()
    );
}

#[test]
fn quoted_arguments_stay_one_word() {
    assert_eq!(
        words(r#"sql -c "SELECT 1, 2" --format csv"#),
        vec!["sql", "-c", "SELECT 1, 2", "--format", "csv"]
    );
}
