//! The SDK's command-line commands, `oxide insert`, `oxide table` and `oxide objects`:
//! clap argument types and the async body of each. The `oxide` binary (crate
//! `oxidelake-cli`) links them as its subcommands, so one installed binary is the front
//! door for queries and managed objects alike.

pub mod insert;
pub mod objects;
pub mod table;

pub use insert::InsertArgs;
pub use objects::ObjectsArgs;
pub use table::TableArgs;

use oxidelake_catalog::CatalogError;
use oxidelake_objects::ObjectError;

use crate::SdkError;

/// Why one of these commands failed; `oxide` prints it as its one `error:` line.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The SDK, the object store or the table layer refused or failed.
    #[error(transparent)]
    Sdk(#[from] SdkError),
    /// `oxide objects cat` of a digest the store does not hold.
    #[error("no object {digest}: {source}")]
    NoObject {
        /// The digest asked for.
        digest: String,
        /// Why the store has no such object.
        source: ObjectError,
    },
    /// `oxide objects verify` found a referenced object missing or damaged.
    #[error("table {table}: object {digest}: {source}")]
    Unverified {
        /// The table whose row references the object.
        table: String,
        /// The object's digest.
        digest: String,
        /// What verification found.
        source: ObjectError,
    },
    /// `oxide objects gc` with a retention below the floor and without `--force`.
    #[error(
        "a retention below {floor_hours} hour(s) can delete objects of INSERTs in flight; \
         pass --force to collect anyway"
    )]
    RetentionBelowFloor {
        /// The floor, in hours.
        floor_hours: u64,
    },
    /// Writing the command's output failed.
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<ObjectError> for CommandError {
    fn from(e: ObjectError) -> Self {
        Self::Sdk(SdkError::Object(e))
    }
}

impl From<CatalogError> for CommandError {
    fn from(e: CatalogError) -> Self {
        Self::Sdk(SdkError::Catalog(e))
    }
}
