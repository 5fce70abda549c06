//! Running statements the way the `oxide sql` user sees them: results in the chosen
//! format on stdout, row count and time on stderr.

use std::io::Write;
use std::time::Instant;

use oxidelake_core::EngineError;

use super::output::{Format, write_batches};
use crate::OxideSession;

/// Runs one statement and prints its result.
pub async fn run_statement(
    session: &OxideSession,
    sql: &str,
    format: Format,
    out: &mut impl Write,
) -> Result<(), EngineError> {
    let started = Instant::now();
    let batches = session.sql(sql).await?;
    write_batches(&batches, format, out)?;
    out.flush().map_err(|e| EngineError::io("stdout", e))?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    eprintln!(
        "{rows} row{} fetched. Elapsed {:.3} seconds.",
        if rows == 1 { "" } else { "s" },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
