//! `CACHE TABLE name` and `UNCACHE TABLE [IF EXISTS] name`, the statements Spark users
//! type to pin a table in memory, read by sqlparser (DataFusion itself rejects them).

use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use oxidelake_core::EngineError;

/// A hot-cache statement, the table named as DataFusion resolves it (unquoted names
/// folded to lower case, quoted ones kept), quoted again where it needs quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CacheStatement {
    /// `CACHE TABLE name`.
    Cache(String),
    /// `UNCACHE TABLE [IF EXISTS] name`.
    Uncache { table: String, if_exists: bool },
}

/// `Some` when `sql` is a CACHE or UNCACHE statement (an error when it is one that is not
/// supported, e.g. `CACHE TABLE t AS SELECT …`); `None` for everything else, which goes
/// to DataFusion untouched.
pub(crate) fn parse(sql: &str) -> Option<Result<CacheStatement, EngineError>> {
    let first = sql.split_whitespace().next()?.to_ascii_uppercase();
    if first != "CACHE" && first != "UNCACHE" {
        return None;
    }
    Some(parse_cache(sql))
}

fn parse_cache(sql: &str) -> Result<CacheStatement, EngineError> {
    let invalid = |detail: String| EngineError::InvalidArgument {
        what: "CACHE statement",
        detail,
    };
    // sqlparser reads anything after the table name, a `;` included, as the start of
    // `CACHE TABLE t [AS] query`.
    let sql = sql.trim().trim_end_matches(';');
    let mut statements = Parser::parse_sql(&GenericDialect {}, sql).map_err(|e| {
        invalid(format!(
            "{e}; expected CACHE TABLE name or UNCACHE TABLE name"
        ))
    })?;
    if statements.len() != 1 {
        return Err(invalid(format!(
            "one statement expected, got {}",
            statements.len()
        )));
    }
    let resolve = |name| {
        object_name_to_table_reference(name, true)
            .map(|t| t.to_quoted_string())
            .map_err(|e| invalid(e.to_string()))
    };
    match statements.remove(0) {
        Statement::Cache {
            table_flag: None,
            table_name,
            options,
            query: None,
            ..
        } if options.is_empty() => Ok(CacheStatement::Cache(resolve(table_name)?)),
        Statement::Cache { .. } => Err(EngineError::unsupported(
            "CACHE TABLE",
            "only `CACHE TABLE name` of a registered Parquet table (no flag, OPTIONS or AS query)",
        )),
        Statement::UNCache {
            table_name,
            if_exists,
        } => Ok(CacheStatement::Uncache {
            table: resolve(table_name)?,
            if_exists,
        }),
        other => Err(invalid(format!("not a CACHE statement: {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_statements_resolve_names_as_datafusion_does() {
        assert_eq!(
            parse("cache table LineItem").unwrap().unwrap(),
            CacheStatement::Cache("lineitem".into())
        );
        assert_eq!(
            parse("CACHE TABLE \"MixedCase\";").unwrap().unwrap(),
            CacheStatement::Cache("\"MixedCase\"".into())
        );
        assert_eq!(
            parse("UNCACHE TABLE IF EXISTS t").unwrap().unwrap(),
            CacheStatement::Uncache {
                table: "t".into(),
                if_exists: true
            }
        );
    }

    #[test]
    fn other_statements_are_left_to_datafusion_and_unsupported_forms_say_so() {
        assert!(parse("SELECT * FROM cache").is_none());
        assert!(parse("  ").is_none());
        let err = parse("CACHE TABLE t AS SELECT 1").unwrap().unwrap_err();
        assert!(matches!(err, EngineError::Unsupported { .. }), "{err}");
        assert!(parse("CACHE t").unwrap().is_err());
    }
}
