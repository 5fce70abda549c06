//! The interactive `oxide sql` prompt: line editing, history kept in `~/.oxide_history`
//! a statement per entry (a multi-line statement comes back whole), statements spanning
//! lines until `;`, the commands of [`super::meta`], errors reported without leaving,
//! Ctrl-C to cancel. Without a terminal on stdin the statements are read from it and run
//! in turn, stopping at the first error unless `--continue-on-error`.

use std::io::IsTerminal;

use oxidelake_core::EngineError;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use super::driver::{Driver, Flow};
use super::run::RunOptions;
use crate::OxideSession;

fn history_file() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".oxide_history"))
}

/// Reads statements from stdin until it ends (`\q` or Ctrl-D at the prompt). Returns how
/// the input ended and how many statements failed (piped input with
/// `continue_on_error`; at the prompt failures are only reported).
pub async fn repl(
    session: &OxideSession,
    options: RunOptions,
    continue_on_error: bool,
) -> Result<(Flow, usize), EngineError> {
    if !std::io::stdin().is_terminal() {
        let mut driver = Driver::new(session, options, continue_on_error, false);
        let flow = driver.run_reader(std::io::stdin().lock()).await?;
        return Ok((flow, driver.failures()));
    }
    let mut driver = Driver::new(session, options, true, true);
    let mut editor =
        DefaultEditor::new().map_err(|e| EngineError::Internal(format!("line editor: {e}")))?;
    let history = history_file();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    if !options.quiet {
        println!("OxideLake SQL. Statements end with ';'. \\? lists the commands, \\q quits.");
    }
    // The lines of the statement being typed, stored as one history entry when it ends.
    let mut typed: Vec<String> = Vec::new();
    let mut interrupted_at_empty_prompt = false;
    loop {
        let prompt = if driver.is_pending() {
            "  -> "
        } else {
            "oxide> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                interrupted_at_empty_prompt = false;
                typed.push(line.clone());
                let flow = driver.feed(&line).await?;
                if !driver.is_pending() {
                    let entry = typed.join("\n");
                    if !entry.trim().is_empty() {
                        let _ = editor.add_history_entry(entry.as_str());
                    }
                    typed.clear();
                }
                if flow == Flow::Quit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C drops the statement being typed; twice at an empty prompt leaves.
                if driver.is_pending() || !typed.is_empty() {
                    driver.clear();
                    typed.clear();
                } else if interrupted_at_empty_prompt {
                    break;
                } else {
                    eprintln!("(Ctrl-C again, \\q or Ctrl-D to leave)");
                    interrupted_at_empty_prompt = true;
                }
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(EngineError::Internal(format!("line editor: {e}"))),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok((Flow::Quit, 0))
}
