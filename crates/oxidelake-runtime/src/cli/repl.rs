//! The interactive `oxide sql` prompt: line editing and history (kept in
//! `~/.oxide_history`), statements spanning lines until `;`, errors reported without
//! leaving. Without a terminal on stdin the statements are read from it and run in turn.

use std::io::{IsTerminal, Read};

use oxidelake_core::EngineError;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use super::output::Format;
use super::run::run_statement;
use super::statements::StatementSplitter;
use crate::OxideSession;

fn history_file() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".oxide_history"))
}

/// Reads statements from stdin until it ends (`\q` or Ctrl-D at the prompt).
pub async fn repl(session: &OxideSession, format: Format) -> Result<(), EngineError> {
    if !std::io::stdin().is_terminal() {
        return run_script(session, format).await;
    }
    let mut editor =
        DefaultEditor::new().map_err(|e| EngineError::Internal(format!("line editor: {e}")))?;
    let history = history_file();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    println!("OxideLake SQL. Statements end with ';'. \\q quits.");
    let mut splitter = StatementSplitter::default();
    loop {
        let prompt = if splitter.is_pending() {
            "  -> "
        } else {
            "oxide> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                if !splitter.is_pending() && matches!(line.trim(), "\\q" | "quit" | "exit") {
                    break;
                }
                let _ = editor.add_history_entry(line.as_str());
                for statement in splitter.push(&line) {
                    let mut out = std::io::stdout().lock();
                    if let Err(e) = run_statement(session, &statement, format, &mut out).await {
                        eprintln!("error: {e}");
                    }
                }
            }
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C drops the statement being typed.
                splitter = StatementSplitter::default();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(EngineError::Internal(format!("line editor: {e}"))),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

async fn run_script(session: &OxideSession, format: Format) -> Result<(), EngineError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| EngineError::io("stdin", e))?;
    let mut splitter = StatementSplitter::default();
    let mut statements = splitter.push(&text);
    statements.extend(splitter.take_rest());
    for statement in statements {
        let mut out = std::io::stdout().lock();
        run_statement(session, &statement, format, &mut out).await?;
    }
    Ok(())
}
