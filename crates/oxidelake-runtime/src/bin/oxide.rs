//! `oxide`: the OxideLake command line.
//!
//! `oxide tui -q "SELECT …" --table name=path.parquet` runs a query under the terminal
//! dashboard: its physical plan with placement, live figures while it runs, then the
//! final figures and the result's column statistics.

use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use oxidelake_runtime::{DetectorProbe, OxideSession, PlacementTarget, run_dashboard};

/// OxideLake: GPU-accelerated analytical SQL over Parquet lakes.
#[derive(Debug, Parser)]
#[command(name = "oxide", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a query under the terminal dashboard (↑/↓ select, Tab panel, q quit).
    Tui(TuiArgs),
}

#[derive(Debug, Args)]
struct TuiArgs {
    /// The SQL query to run.
    #[arg(short = 'q', long)]
    query: String,
    /// A Parquet file or directory to query, as NAME=PATH (repeatable).
    #[arg(short = 't', long = "table", value_name = "NAME=PATH")]
    tables: Vec<String>,
    /// Backend to place operators for: auto (this machine), cpu, cuda or metal. A GPU
    /// this machine lacks runs the GPU operators' CPU paths.
    #[arg(long, default_value = "auto")]
    placement: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Tui(args) => tui(args),
    }
}

fn tui(args: TuiArgs) -> anyhow::Result<()> {
    let target: PlacementTarget = args.placement.parse().map_err(anyhow::Error::msg)?;
    let session = OxideSession::local_with(target, Arc::new(DetectorProbe));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for table in &args.tables {
        let (name, path) = table
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--table wants NAME=PATH, got {table:?}"))?;
        runtime.block_on(session.register_parquet(name, path))?;
    }
    drop(runtime);
    run_dashboard(session, &args.query)?;
    Ok(())
}
