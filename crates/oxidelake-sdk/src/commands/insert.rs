//! `oxide insert`: one managed-object row.
//!
//! ```text
//! oxide insert --data-dir D "INSERT INTO robots.episodes (id, episode) VALUES (?, ?)" 42 @./ep42.mcap
//! ```
//! Values are typed by their columns; `@path` uploads a file into a FILE column (all of
//! the bytes after `@` are the path, `#` included, UTF-8 or not); `--mime
//! episode=video/mp4` overrides the type sniffed for that column's file; `NULL` is NULL.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::CommandError;
use crate::LakeClient;
use crate::cli::{apply_mime_overrides, typed_params};

/// Insert one row, uploading file parameters as managed objects.
#[derive(Debug, Args)]
pub struct InsertArgs {
    /// The data directory (objects and tables); it must exist.
    #[arg(long)]
    data_dir: PathBuf,
    /// `column=type/subtype`: the MIME type of that column's file (repeatable);
    /// otherwise it is sniffed from the content and the file name.
    #[arg(long = "mime", value_name = "COLUMN=TYPE")]
    mime: Vec<String>,
    /// `INSERT INTO ns.table (c1, ...) VALUES (?, ...)`.
    statement: String,
    /// One value per `?`: typed by its column; `@path` for files (the path byte for
    /// byte, also when it is not UTF-8); `NULL`.
    values: Vec<OsString>,
}

/// Runs `oxide insert`: types the values by their columns, uploads the files, appends the row and prints its version and objects.
pub async fn run(args: InsertArgs) -> Result<(), CommandError> {
    let client = LakeClient::open_existing(&args.data_dir)?;
    let statement = crate::parse_insert(&args.statement)?;
    let schema = client.catalog().schema(&statement.table.parse()?).await?;
    let mut params = typed_params(&args.statement, &schema, &args.values)?;
    apply_mime_overrides(&args.statement, &mut params, &args.mime)?;
    let outcome = client.execute(&args.statement, params).await?;
    println!(
        "inserted 1 row into {} (version {})",
        statement.table, outcome.version
    );
    for location in outcome.locations {
        println!(
            "  {}  {} bytes  {}  sha256 {}",
            client.objects().file_url(&location)?,
            location.size(),
            location.mime(),
            location.sha256()
        );
    }
    Ok(())
}
