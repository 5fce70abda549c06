//! Turning input lines into statements and prompt commands, and running them, for every
//! way SQL reaches `oxide sql`: `-c`, `-f`, `~/.oxiderc`, piped stdin and the prompt.

use std::io::BufRead;

use oxidelake_core::EngineError;

use super::error_line::one_line;
use super::meta::{self, HELP, MetaCommand};
use super::run::{Ran, RunOptions, run_statement};
use super::statements::StatementSplitter;
use crate::OxideSession;

/// What the caller does after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Read on.
    Continue,
    /// The user asked to leave (`\q`).
    Quit,
    /// Ctrl-C cancelled a statement outside the prompt: stop (status 130).
    Interrupted,
}

/// Runs what input lines complete, with the session's dialect and the printing options
/// the commands change.
pub struct Driver<'s> {
    session: &'s OxideSession,
    /// How results print; `.mode` and `\timing` change it.
    pub options: RunOptions,
    splitter: StatementSplitter,
    /// Report a failed statement and go on (the prompt, `--continue-on-error`) instead
    /// of stopping with the error.
    continue_on_error: bool,
    /// At the prompt a cancelled statement returns to it; elsewhere it stops the run.
    interactive: bool,
    /// Statements and commands that failed and were reported.
    failures: usize,
}

impl std::fmt::Debug for Driver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("options", &self.options)
            .field("continue_on_error", &self.continue_on_error)
            .field("interactive", &self.interactive)
            .finish_non_exhaustive()
    }
}

impl<'s> Driver<'s> {
    /// A driver for `session`.
    pub fn new(
        session: &'s OxideSession,
        options: RunOptions,
        continue_on_error: bool,
        interactive: bool,
    ) -> Self {
        let dialect = session
            .context()
            .state()
            .config()
            .options()
            .sql_parser
            .dialect;
        Self {
            session,
            options,
            splitter: StatementSplitter::for_dialect(dialect.as_ref()),
            continue_on_error,
            interactive,
            failures: 0,
        }
    }

    /// How many statements or commands failed (and were reported, the run going on).
    pub fn failures(&self) -> usize {
        self.failures
    }

    /// Whether a statement is partly typed.
    pub fn is_pending(&self) -> bool {
        self.splitter.is_pending()
    }

    /// Drops the statement being typed.
    pub fn clear(&mut self) {
        self.splitter.clear();
    }

    /// Runs the statements `line` completes, or the command it is (commands count only
    /// at the start of a statement).
    pub async fn feed(&mut self, line: &str) -> Result<Flow, EngineError> {
        if !self.splitter.is_pending()
            && let Some(command) = meta::parse(line)
        {
            return self.command(command).await;
        }
        for statement in self.splitter.push(line) {
            let flow = self.statement(&statement).await?;
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }

    /// Runs what is still buffered at the end of the input: statements, and a command
    /// that followed one on its line (`-c "SELECT 1; \timing"`).
    pub async fn end_of_input(&mut self) -> Result<Flow, EngineError> {
        let statements = self.splitter.finish();
        let last = statements.len().saturating_sub(1);
        for (i, text) in statements.iter().enumerate() {
            let flow = match meta::parse(text).filter(|_| i == last) {
                Some(command) => self.command(command).await?,
                None => self.statement(text).await?,
            };
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }

    /// Feeds `text` line by line and then ends it (`-c`, a file, piped stdin).
    pub async fn run_text(&mut self, text: &str) -> Result<Flow, EngineError> {
        self.run_lines(text.lines().map(|l| Ok(l.to_string())))
            .await
    }

    /// [`Self::run_text`] over a reader, a line at a time (a long script starts running
    /// before it is read to the end).
    pub async fn run_reader(&mut self, reader: impl BufRead) -> Result<Flow, EngineError> {
        self.run_lines(reader.lines()).await
    }

    async fn run_lines(
        &mut self,
        lines: impl Iterator<Item = std::io::Result<String>>,
    ) -> Result<Flow, EngineError> {
        for line in lines {
            let line = line.map_err(|e| EngineError::io("input", e))?;
            let flow = self.feed(&line).await?;
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        self.end_of_input().await
    }

    async fn statement(&mut self, sql: &str) -> Result<Flow, EngineError> {
        let mut out = std::io::stdout().lock();
        match run_statement(self.session, sql, &self.options, &mut out).await {
            Ok(Ran::Done) => Ok(Flow::Continue),
            Ok(Ran::Cancelled) if self.interactive => Ok(Flow::Continue),
            Ok(Ran::Cancelled) => Ok(Flow::Interrupted),
            Err(e) => self.failed(e),
        }
    }

    fn failed(&mut self, e: EngineError) -> Result<Flow, EngineError> {
        if !self.continue_on_error {
            return Err(e);
        }
        self.failures += 1;
        eprintln!("error: {}", one_line(&e.to_string()));
        Ok(Flow::Continue)
    }

    async fn command(&mut self, command: Result<MetaCommand, String>) -> Result<Flow, EngineError> {
        let command = match command {
            Ok(command) => command,
            Err(detail) => {
                return self.failed(EngineError::InvalidArgument {
                    what: "command",
                    detail,
                });
            }
        };
        if let Some(sql) = meta::sql_for(&command) {
            return self.statement(&sql).await;
        }
        match command {
            MetaCommand::Quit => return Ok(Flow::Quit),
            MetaCommand::Help => println!("{HELP}"),
            MetaCommand::Timing(on) => {
                self.options.timing = on.unwrap_or(!self.options.timing);
                if !self.options.quiet {
                    let state = if self.options.timing { "on" } else { "off" };
                    eprintln!("Timing is {state}.");
                }
            }
            MetaCommand::Mode(format) => {
                self.options.format = format;
                if !self.options.quiet {
                    eprintln!("Output format is {format:?}.");
                }
            }
            MetaCommand::ListTables | MetaCommand::Describe(_) | MetaCommand::AllColumns => {}
        }
        Ok(Flow::Continue)
    }
}
