//! `oxide objects`: managed objects.
//!
//! ```text
//! oxide objects --data-dir D cat <sha256> > out.mcap   verified, then written to stdout
//! oxide objects --data-dir D cat --stream <sha256>     one pass, verified at the end
//! oxide objects --data-dir D verify                    re-hash every referenced object
//! oxide objects --data-dir D gc --retention-hours 24   delete orphans older than that
//! ```

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use oxidelake_objects::{GcPolicy, MIN_RETENTION, Sha256Digest, parse_retention_hours};

use super::CommandError;
use crate::LakeClient;

/// Read, verify and collect managed objects.
#[derive(Debug, Args)]
pub struct ObjectsArgs {
    /// The data directory (objects and tables); it must exist.
    #[arg(long)]
    data_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write an object's bytes to stdout. By default the whole object is verified
    /// against its digest before the first byte is written.
    Cat {
        /// The object's SHA-256 (64 hex characters).
        sha256: String,
        /// Stream in one pass instead: output is UNVERIFIED until the command exits
        /// with status 0 (a damaged object fails at the end, after its bytes were
        /// written). For pipelines that discard output on failure.
        #[arg(long)]
        stream: bool,
    },
    /// Re-hash every object a table references, through the location each row stores;
    /// fails on the first missing or damaged one.
    Verify,
    /// Delete objects no table references that are older than the retention window.
    Gc {
        /// Retention window in hours: a finite number, at least 1 unless --force.
        #[arg(long, default_value = "24", value_parser = retention_hours)]
        retention_hours: std::time::Duration,
        /// Allow a retention below the 1-hour floor. Objects uploaded by writers that
        /// do not pin (not `oxide insert`) may then be deleted before their commit.
        #[arg(long)]
        force: bool,
    },
}

fn retention_hours(text: &str) -> Result<std::time::Duration, String> {
    parse_retention_hours(text).map_err(|e| e.to_string())
}

/// Runs `oxide objects`.
pub async fn run(args: ObjectsArgs) -> Result<(), CommandError> {
    let client = LakeClient::open_existing(&args.data_dir)?;
    match args.command {
        Command::Cat { sha256, stream } => {
            let digest: Sha256Digest = sha256.parse()?;
            let location =
                client
                    .objects()
                    .location_of(&digest)
                    .map_err(|source| CommandError::NoObject {
                        digest: sha256.clone(),
                        source,
                    })?;
            let mut reader = if stream {
                client.objects().open_streaming(&location)?
            } else {
                client.open_object(&location)?
            };
            let mut out = std::io::stdout().lock();
            std::io::copy(&mut reader, &mut out).map_err(oxidelake_objects::verification_error)?;
            out.flush()?;
        }
        Command::Verify => {
            let locations = client.referenced_locations().await?;
            for (table, location) in &locations {
                client
                    .objects()
                    .verify(location)
                    .map_err(|source| CommandError::Unverified {
                        table: table.to_string(),
                        digest: location.sha256().to_string(),
                        source,
                    })?;
            }
            println!("{} referenced objects verified", locations.len());
        }
        Command::Gc {
            retention_hours,
            force,
        } => {
            let mut policy = GcPolicy::new(retention_hours);
            if force {
                policy = policy.allow_below_floor();
            } else if retention_hours < MIN_RETENTION {
                return Err(CommandError::RetentionBelowFloor {
                    floor_hours: MIN_RETENTION.as_secs() / 3600,
                });
            }
            let report = client.gc(policy).await?;
            println!(
                "scanned {}, kept {} referenced, {} pinned by INSERTs in flight and {} within \
                 retention, deleted {} objects and {} abandoned uploads, freed {} bytes",
                report.scanned,
                report.referenced,
                report.pinned,
                report.too_young,
                report.deleted,
                report.deleted_uploads,
                report.freed_bytes
            );
        }
    }
    Ok(())
}
