//! Running statements the way the `oxide sql` user sees them: results in the chosen
//! format on stdout, row count and time on stderr.

use std::io::Write;
use std::time::Instant;

use oxidelake_core::EngineError;

use super::output::{Format, write_batches};
use crate::{OxideSession, SpillSummary};

/// Runs one statement and prints its result.
pub async fn run_statement(
    session: &OxideSession,
    sql: &str,
    format: Format,
    out: &mut impl Write,
) -> Result<(), EngineError> {
    let started = Instant::now();
    let (batches, spills) = session.sql_with_spills(sql).await?;
    write_batches(&batches, format, out)?;
    out.flush().map_err(|e| EngineError::io("stdout", e))?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    eprintln!(
        "{rows} row{} fetched. Elapsed {:.3} seconds.{}",
        if rows == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64(),
        spill_note(spills)
    );
    Ok(())
}

/// " Spilled 3 files (12.5 MiB) to disk." when the query spilled, else nothing: a user
/// who set a memory limit learns it was reached without reading EXPLAIN ANALYZE.
fn spill_note(spills: SpillSummary) -> String {
    if spills.files == 0 {
        return String::new();
    }
    format!(
        " Spilled {} file{} ({:.1} MiB) to disk.",
        spills.files,
        if spills.files == 1 { "" } else { "s" },
        spills.bytes as f64 / (1024.0 * 1024.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spill_note_appears_only_when_a_query_spilled() {
        assert_eq!(spill_note(SpillSummary::default()), "");
        let note = spill_note(SpillSummary {
            files: 2,
            bytes: 3 << 20,
        });
        assert_eq!(note, " Spilled 2 files (3.0 MiB) to disk.");
    }
}
