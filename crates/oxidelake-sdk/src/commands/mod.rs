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
