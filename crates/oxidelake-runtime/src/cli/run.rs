//! Running one statement the way the `oxide sql` user sees it: results streamed in the
//! chosen format on stdout; row count, time and spills on stderr; Ctrl-C cancels the
//! query (on a cluster, its job too) rather than the process.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use oxidelake_core::EngineError;

use super::cluster_cancel::ClusterQuery;
use super::interrupt::next_interrupt;
use super::output::{Format, MaxRows, Printed, ResultPrinter};
use crate::{OxideSession, QueryStream, SpillSummary};

/// How statements print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Output format (`--format`, `.mode`).
    pub format: Format,
    /// Rows the table format shows (`--maxrows`).
    pub max_rows: MaxRows,
    /// No row-count line, no banner (`--quiet`).
    pub quiet: bool,
    /// The elapsed time on the row-count line (`\timing`, `.timer`).
    pub timing: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            format: Format::Table,
            max_rows: MaxRows::default(),
            quiet: false,
            timing: true,
        }
    }
}

/// How a statement ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// It ran to the end and its result was printed.
    Done,
    /// Ctrl-C cancelled it.
    Cancelled,
}

/// Runs one statement and prints its result; Ctrl-C (SIGINT) while it runs drops the
/// query (DataFusion stops its streams; on a cluster the scheduler is asked to cancel
/// the job) and returns [`Ran::Cancelled`]; nothing of the result is printed after
/// "Query cancelled.". A statement nested deeper than [`crate::MAX_STATEMENT_DEPTH`]
/// is refused before it is parsed (`OxideSession::sql_stream` checks it).
pub async fn run_statement(
    session: &OxideSession,
    sql: &str,
    options: &RunOptions,
    out: &mut impl Write,
) -> Result<Ran, EngineError> {
    let started = Instant::now();
    // Watching starts before the statement does, so an early Ctrl-C counts too.
    let mut interrupt = std::pin::pin!(next_interrupt());
    let mut stream = tokio::select! {
        stream = session.sql_stream(sql) => stream?,
        () = &mut interrupt => {
            eprintln!("Query cancelled.");
            return Ok(Ran::Cancelled);
        }
    };
    let cluster = ClusterQuery::of(session, &stream);
    let printed = tokio::select! {
        result = print_stream(&mut stream, options, out) => Some(result?),
        () = &mut interrupt => None,
    };
    let Some((printed, spills)) = printed else {
        eprintln!("Query cancelled.");
        if let Some(query) = cluster {
            // A second Ctrl-C while the job's id or the scheduler's answer is awaited
            // ends the wait.
            eprintln!("{}", query.cancel(&mut stream, next_interrupt()).await);
        }
        return Ok(Ran::Cancelled);
    };
    if !options.quiet {
        eprintln!(
            "{}",
            summary_line(printed, options, started.elapsed().as_secs_f64(), spills)
        );
    }
    Ok(Ran::Done)
}

async fn print_stream(
    stream: &mut QueryStream,
    options: &RunOptions,
    out: &mut impl Write,
) -> Result<(Printed, SpillSummary), EngineError> {
    let schema = stream.schema();
    if schema.fields().is_empty() {
        // SET, CREATE and the like: nothing to print but the count.
        while let Some(batch) = stream.next().await {
            batch?;
        }
        return Ok((Printed::default(), stream.spills()));
    }
    let format = options.format.resolve(std::io::stdout().is_terminal());
    let mut printer = ResultPrinter::new(format, options.max_rows, schema, out)?;
    while let Some(batch) = stream.next().await {
        printer.write(&batch?)?;
    }
    let printed = printer.finish()?;
    out.flush().map_err(|e| EngineError::io("stdout", e))?;
    Ok((printed, stream.spills()))
}

/// "3 rows fetched. Elapsed 0.012 seconds." with what `--maxrows` hid and what spilled.
fn summary_line(
    printed: Printed,
    options: &RunOptions,
    seconds: f64,
    spills: SpillSummary,
) -> String {
    let rows = printed.rows;
    let mut line = format!("{rows} row{} fetched.", if rows == 1 { "" } else { "s" });
    if printed.shown < rows {
        line.push_str(&format!(
            " (First {} displayed. Use --maxrows to adjust.)",
            printed.shown
        ));
    }
    if options.timing {
        line.push_str(&format!(" Elapsed {seconds:.3} seconds."));
    }
    line.push_str(&spill_note(spills));
    line
}

/// " Spilled 3 files (12.5 MiB) to disk." when the query spilled, and " Held 4.0 MiB of
/// joins split for the device limit in host memory." when a device split kept its parts
/// in memory; nothing otherwise. A user who set a memory or device limit learns it was
/// reached without reading EXPLAIN ANALYZE.
fn spill_note(spills: SpillSummary) -> String {
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let mut note = String::new();
    if spills.held_in_host_bytes > 0 {
        note.push_str(&format!(
            " Held {:.1} MiB of joins split for the device limit in host memory.",
            mib(spills.held_in_host_bytes)
        ));
    }
    if spills.files > 0 {
        note.push_str(&format!(
            " Spilled {} file{} ({:.1} MiB) to disk.",
            spills.files,
            if spills.files == 1 { "" } else { "s" },
            mib(spills.bytes)
        ));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spill_note_appears_only_when_a_query_spilled_or_held_split_parts_in_memory() {
        assert_eq!(spill_note(SpillSummary::default()), "");
        let note = spill_note(SpillSummary {
            files: 2,
            bytes: 3 << 20,
            held_in_host_bytes: 0,
        });
        assert_eq!(note, " Spilled 2 files (3.0 MiB) to disk.");
        let note = spill_note(SpillSummary {
            files: 1,
            bytes: 1 << 20,
            held_in_host_bytes: 4 << 20,
        });
        assert_eq!(
            note,
            " Held 4.0 MiB of joins split for the device limit in host memory. \
             Spilled 1 file (1.0 MiB) to disk."
        );
    }

    #[test]
    fn the_summary_says_how_many_rows_max_rows_hid_and_drops_the_time_when_timing_is_off() {
        let options = RunOptions {
            timing: false,
            ..RunOptions::default()
        };
        let printed = Printed {
            rows: 100,
            shown: 40,
        };
        assert_eq!(
            summary_line(printed, &options, 1.0, SpillSummary::default()),
            "100 rows fetched. (First 40 displayed. Use --maxrows to adjust.)"
        );
        let line = summary_line(
            Printed { rows: 1, shown: 1 },
            &RunOptions::default(),
            0.25,
            SpillSummary::default(),
        );
        assert_eq!(line, "1 row fetched. Elapsed 0.250 seconds.");
    }

    #[tokio::test]
    async fn an_empty_result_prints_its_header() {
        let session = OxideSession::local();
        let mut out = Vec::new();
        let options = RunOptions {
            quiet: true,
            ..RunOptions::default()
        };
        let ran = run_statement(&session, "SELECT 1 AS one WHERE false", &options, &mut out)
            .await
            .unwrap();
        assert_eq!(ran, Ran::Done);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("| one |"), "{text}");
    }
}
