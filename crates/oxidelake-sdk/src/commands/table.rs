//! `oxide table`: versioned tables.
//!
//! ```text
//! oxide table --data-dir D create robots.episodes "id:int64!, note:utf8, episode:file"
//! oxide table --data-dir D list
//! ```

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CommandError;
use crate::LakeClient;
use crate::cli::parse_columns;

/// Create and list versioned tables.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// The data directory (objects and tables).
    #[arg(long)]
    data_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create NAME (`ns.table`) with columns `name:type[!]` (int64, float64, utf8, bool,
    /// file; `!` = NOT NULL).
    Create {
        /// `ns.table`.
        name: String,
        /// e.g. `"id:int64!, episode:file"`.
        columns: String,
    },
    /// List tables with their current version.
    List,
}

/// Runs `oxide table`.
pub async fn run(args: TableArgs) -> Result<(), CommandError> {
    match args.command {
        Command::Create { name, columns } => {
            let client = LakeClient::open(&args.data_dir)?;
            let version = client.create_table(&name, parse_columns(&columns)?).await?;
            println!("created {name} (version {version})");
        }
        Command::List => {
            let client = LakeClient::open_existing(&args.data_dir)?;
            for name in client.catalog().list_tables()? {
                let version = client.catalog().version(&name).await?;
                println!("{name}\tversion {version}");
            }
        }
    }
    Ok(())
}
