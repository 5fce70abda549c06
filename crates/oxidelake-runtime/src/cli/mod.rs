//! The pieces of the `oxide` command line: data generation, statement running and
//! output, the prompt's commands and the REPL, table registration and the demo.

pub mod arguments;
mod cluster_cancel;
pub mod demo;
pub mod driver;
pub mod error_line;
pub mod gen_data;
pub mod interrupt;
pub mod logging;
pub mod meta;
pub mod output;
pub mod progress;
pub mod repl;
pub mod run;
pub mod statements;
pub mod tables;
pub mod tpch;
