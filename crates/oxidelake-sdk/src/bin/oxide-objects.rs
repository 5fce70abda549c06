//! `oxide objects` (run as `oxide objects …` or `oxide-objects …`): managed objects.
//!
//! ```text
//! oxide objects --data-dir D cat <sha256> > out.mcap   verified bytes to stdout
//! oxide objects --data-dir D verify                    re-hash every referenced object
//! oxide objects --data-dir D gc --retention-hours 24   delete orphans older than that
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use oxidelake_objects::{DataLocation, Sha256Digest};
use oxidelake_sdk::LakeClient;

/// Read, verify and collect managed objects.
#[derive(Debug, Parser)]
#[command(name = "oxide objects", version, about, long_about = None)]
struct Args {
    /// The data directory (objects and tables).
    #[arg(long)]
    data_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write an object's bytes to stdout, verified against its digest.
    Cat {
        /// The object's SHA-256 (64 hex characters).
        sha256: String,
    },
    /// Re-hash every object a table references; fails on the first bad one.
    Verify,
    /// Delete objects no table references that are older than the retention window.
    Gc {
        /// Retention window in hours (uploads younger than this are never deleted).
        #[arg(long, default_value_t = 24.0)]
        retention_hours: f64,
    },
}

fn main() -> ExitCode {
    oxidelake_sdk::cli::exit_status(run(Args::parse()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = LakeClient::open(&args.data_dir)?;
    match args.command {
        Command::Cat { sha256 } => {
            let digest: Sha256Digest = sha256.parse()?;
            let path = client.objects().path_of(&digest);
            let size = std::fs::metadata(&path)
                .map_err(|e| anyhow::anyhow!("no object {sha256}: {e}"))?
                .len();
            let location = DataLocation::new(
                format!("file://{}", path.display()),
                "application/octet-stream",
                size,
                digest,
            );
            let mut reader = client.open_object(&location)?;
            let mut out = std::io::stdout().lock();
            std::io::copy(&mut reader, &mut out).map_err(oxidelake_objects::verification_error)?;
            out.flush()?;
        }
        Command::Verify => {
            let digests = client.referenced_objects().await?;
            for digest in &digests {
                let path = client.objects().path_of(digest);
                let size = std::fs::metadata(&path)
                    .map_err(|e| anyhow::anyhow!("object {digest} is missing: {e}"))?
                    .len();
                let location =
                    DataLocation::new(format!("file://{}", path.display()), "", size, *digest);
                client.objects().verify(&location)?;
            }
            println!("{} referenced objects verified", digests.len());
        }
        Command::Gc { retention_hours } => {
            let retention = Duration::from_secs_f64(retention_hours.max(0.0) * 3600.0);
            let report = client.gc(retention).await?;
            println!(
                "scanned {}, kept {} referenced and {} within retention, deleted {} objects \
                 and {} abandoned uploads, freed {} bytes",
                report.scanned,
                report.referenced,
                report.too_young,
                report.deleted,
                report.deleted_uploads,
                report.freed_bytes
            );
        }
    }
    Ok(())
}
