//! The prompt's own commands: the backslash forms of psql and datafusion-cli and the dot
//! forms of the duckdb and sqlite shells. Those that look things up become SQL over the
//! information schema, so they answer for every table the session knows.

use super::output::{FORMAT_NAMES, Format};

/// One command typed at the prompt (or in a script) instead of SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCommand {
    /// `\q`, `quit`, `exit`, `.quit`, `.exit`.
    Quit,
    /// `\?`, `\h`, `.help`.
    Help,
    /// `\d`, `\dt`, `.tables`: the tables (not the information schema's views).
    ListTables,
    /// `\d NAME`, `.schema NAME`: a table's columns.
    Describe(String),
    /// `.schema`: every table's columns.
    AllColumns,
    /// `\timing [on|off]`, `.timer on|off`: toggle or set the elapsed time.
    Timing(Option<bool>),
    /// `.mode FORMAT`, `\pset format FORMAT`: the output format.
    Mode(Format),
}

/// What the prompt's help lists.
pub const HELP: &str = "\
Statements end with ';' and may span lines. Commands:
  \\d, \\dt, .tables       list tables
  \\d NAME, .schema NAME   describe a table's columns
  .schema                 every table's columns
  \\timing, .timer on|off  show or hide the elapsed time
  .mode FORMAT            output format: table, csv, tsv, json, ndjson, markdown
  \\?, .help               this help
  \\q, .quit, quit, exit   leave (also Ctrl-D)
Ctrl-C cancels a running query; Ctrl-C twice at an empty prompt leaves.
Discovery in SQL: SHOW TABLES; SHOW COLUMNS FROM t; SHOW oxidelake.placement.target;
SHOW ALL; SELECT * FROM 'path/to/file.parquet'.";

fn on_off(word: Option<&str>) -> Result<Option<bool>, String> {
    match word.map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(other) => Err(format!("expected on or off, got {other:?}")),
    }
}

/// `Some` when `line` is a command rather than SQL (an `Err` names what is wrong with
/// one that is misspelt); `None` for SQL.
pub fn parse(line: &str) -> Option<Result<MetaCommand, String>> {
    let line = line.trim().trim_end_matches(';').trim_end();
    if matches!(line.to_ascii_lowercase().as_str(), "quit" | "exit") {
        return Some(Ok(MetaCommand::Quit));
    }
    if !(line.starts_with('\\') || line.starts_with('.')) {
        return None;
    }
    // `.5 + 1` is SQL, not a command.
    if line.chars().nth(1).is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut words = line.split_whitespace();
    let head = words.next().unwrap_or_default();
    let arg = words.next();
    let extra = words.next();
    let command = match (head, arg) {
        ("\\q" | ".quit" | ".exit" | ".q", None) => Ok(MetaCommand::Quit),
        ("\\?" | "\\h" | "\\help" | ".help", _) => Ok(MetaCommand::Help),
        ("\\d" | "\\dt" | ".tables", None) => Ok(MetaCommand::ListTables),
        ("\\d" | "\\d+" | ".schema", Some(table)) => Ok(MetaCommand::Describe(table.into())),
        (".schema", None) => Ok(MetaCommand::AllColumns),
        ("\\timing" | ".timer", word) => on_off(word).map(MetaCommand::Timing),
        (".mode", Some(format)) => format.parse().map(MetaCommand::Mode),
        (".mode", None) => Err(format!(".mode needs a format: {FORMAT_NAMES}")),
        ("\\pset", Some("format")) => match extra {
            Some(format) => return Some(format.parse().map(MetaCommand::Mode)),
            None => Err(format!("\\pset format needs a format: {FORMAT_NAMES}")),
        },
        _ => Err(format!("unknown command {line:?} (\\? lists the commands)")),
    };
    let takes_extra = matches!(head, "\\pset");
    if extra.is_some() && !takes_extra && command.is_ok() {
        return Some(Err(format!("too many arguments: {line:?}")));
    }
    Some(command)
}

/// The SQL a lookup command runs (`None` for commands that change the prompt).
pub fn sql_for(command: &MetaCommand) -> Option<String> {
    match command {
        MetaCommand::ListTables => Some(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables \
             WHERE table_schema <> 'information_schema' ORDER BY table_schema, table_name"
                .into(),
        ),
        MetaCommand::Describe(table) => Some(format!("DESCRIBE {table}")),
        MetaCommand::AllColumns => Some(
            "SELECT table_name, column_name, data_type, is_nullable \
             FROM information_schema.columns WHERE table_schema <> 'information_schema' \
             ORDER BY table_name, ordinal_position"
                .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backslash_and_dot_forms_mean_the_same_command() {
        for (line, command) in [
            ("\\q", MetaCommand::Quit),
            (".quit", MetaCommand::Quit),
            ("exit", MetaCommand::Quit),
            ("\\?", MetaCommand::Help),
            ("\\d", MetaCommand::ListTables),
            ("\\dt", MetaCommand::ListTables),
            (".tables", MetaCommand::ListTables),
            ("\\d lineitem", MetaCommand::Describe("lineitem".into())),
            (
                ".schema lineitem;",
                MetaCommand::Describe("lineitem".into()),
            ),
            (".schema", MetaCommand::AllColumns),
            ("\\timing", MetaCommand::Timing(None)),
            (".timer off", MetaCommand::Timing(Some(false))),
            (".mode markdown", MetaCommand::Mode(Format::Markdown)),
            ("\\pset format csv", MetaCommand::Mode(Format::Csv)),
        ] {
            assert_eq!(parse(line), Some(Ok(command)), "{line}");
        }
    }

    #[test]
    fn sql_is_not_a_command() {
        for line in ["SELECT 1", ".5 + 1", "  select '\\d'", "quitting"] {
            assert_eq!(parse(line), None, "{line}");
        }
    }

    #[test]
    fn a_misspelt_command_is_an_error_that_points_to_the_help() {
        assert!(parse("\\x").unwrap().unwrap_err().contains("\\?"));
        assert!(
            parse(".mode yaml")
                .unwrap()
                .unwrap_err()
                .contains("markdown")
        );
        assert!(parse(".timer maybe").unwrap().is_err());
        assert!(parse("\\d a b").unwrap().is_err());
    }
}
