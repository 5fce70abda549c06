//! The INSERT grammar the SDK accepts, deliberately narrow:
//!
//! ```text
//! INSERT INTO <namespace>.<table> (<column>, ...) VALUES (?, ...) [;]
//! ```
//!
//! One row, placeholders only (values travel as typed parameters, never as SQL text).
//! The statement is read by sqlparser, as DataFusion reads SQL, and names resolve as
//! DataFusion resolves them: unquoted names fold to lower case, `"Quoted"` ones are kept.
//! Anything beyond the narrow form (RETURNING, ON CONFLICT, a SELECT, literals, several
//! rows or statements) is refused before any parameter is looked at, so an unsupported
//! statement never starts an upload.

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectName, ObjectNamePart, SetExpr, Statement, TableObject, Value,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::SdkError;

/// A parsed INSERT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertStatement {
    /// `namespace.table`.
    pub table: String,
    /// The columns, in statement order.
    pub columns: Vec<String>,
}

fn unsupported(detail: impl Into<String>) -> SdkError {
    SdkError::UnsupportedSyntax(detail.into())
}

const FORM: &str =
    "only `INSERT INTO ns.table (columns) VALUES (?, ...)` with ? placeholders is accepted";

/// An identifier as DataFusion resolves it (its ident normalizer folds ASCII only).
fn resolve(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_ascii_lowercase(),
    }
}

fn name_parts(name: &ObjectName) -> Result<Vec<&Ident>, SdkError> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => Ok(ident),
            other => Err(unsupported(format!("{other} is not a name; {FORM}"))),
        })
        .collect()
}

/// Parses `sql` as the narrow INSERT.
pub fn parse_insert(sql: &str) -> Result<InsertStatement, SdkError> {
    let statements = Parser::parse_sql(&GenericDialect {}, sql)
        .map_err(|e| unsupported(format!("{e}; {FORM}")))?;
    let statement = match statements.as_slice() {
        [one] => one,
        [] => return Err(unsupported(format!("no statement; {FORM}"))),
        _ => return Err(unsupported("one statement only")),
    };
    let Statement::Insert(insert) = statement else {
        return Err(unsupported(format!("not an INSERT; {FORM}")));
    };
    let TableObject::TableName(table) = &insert.table else {
        return Err(unsupported(format!("a table name is expected; {FORM}")));
    };
    let [namespace, table_ident] = name_parts(table)?[..] else {
        return Err(unsupported(format!(
            "`{table}`: the table is named ns.table; {FORM}"
        )));
    };
    if insert.columns.is_empty() {
        return Err(unsupported(format!("the column list is missing; {FORM}")));
    }
    let mut column_idents = Vec::new();
    for column in &insert.columns {
        match name_parts(column)?[..] {
            [ident] => column_idents.push(ident),
            _ => {
                return Err(unsupported(format!(
                    "`{column}` is not a column name; {FORM}"
                )));
            }
        }
    }
    let Some(SetExpr::Values(values)) = insert.source.as_ref().map(|q| q.body.as_ref()) else {
        return Err(unsupported(format!(
            "values must be ? placeholders; {FORM}"
        )));
    };
    let [row] = values.rows.as_slice() else {
        return Err(unsupported("one row only"));
    };
    for value in &row.content {
        let Expr::Value(v) = value else {
            return Err(unsupported(format!(
                "values must be ? placeholders, found {value}"
            )));
        };
        if v.value != Value::Placeholder("?".into()) {
            return Err(unsupported(format!(
                "values must be ? placeholders, found {value}"
            )));
        }
    }
    // Whatever else sqlparser accepted (RETURNING, ON CONFLICT, ORDER BY, an alias...)
    // shows in the statement's text: only the narrow form prints back as itself.
    let canonical = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        insert
            .columns
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        vec!["?"; row.content.len()].join(", ")
    );
    if statement.to_string() != canonical {
        return Err(unsupported(format!(
            "`{statement}` goes beyond the narrow form; {FORM}"
        )));
    }
    let columns: Vec<String> = column_idents.into_iter().map(resolve).collect();
    if row.content.len() != columns.len() {
        return Err(SdkError::PlaceholderCount {
            columns: columns.len(),
            placeholders: row.content.len(),
        });
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = columns.iter().find(|c| !seen.insert(c.as_str())) {
        return Err(unsupported(format!("column {dup} named twice")));
    }
    Ok(InsertStatement {
        table: format!("{}.{}", resolve(namespace), resolve(table_ident)),
        columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrow_insert_parses_in_any_keyword_case() {
        let s = parse_insert("insert into robots.episodes (id, episode) values (?, ?);").unwrap();
        assert_eq!(s.table, "robots.episodes");
        assert_eq!(s.columns, vec!["id", "episode"]);
    }

    #[test]
    fn anything_else_is_unsupported_syntax() {
        for sql in [
            "INSERT INTO episodes (id) VALUES (?)",
            "INSERT INTO robots.episodes VALUES (?)",
            "INSERT INTO robots.episodes (id) VALUES (42)",
            "INSERT INTO robots.episodes (id) VALUES (?), (?)",
            "INSERT INTO robots.episodes (id) SELECT 1",
            "INSERT INTO robots.episodes (id) VALUES ('x')",
            "UPDATE robots.episodes SET id = ?",
            "INSERT INTO robots.episodes (id) VALUES (?); DROP TABLE x",
        ] {
            assert!(
                matches!(parse_insert(sql), Err(SdkError::UnsupportedSyntax(_))),
                "{sql}"
            );
        }
        assert!(matches!(
            parse_insert("INSERT INTO a.b (x, y) VALUES (?)"),
            Err(SdkError::PlaceholderCount { .. })
        ));
        for sql in [
            "INSERT INTO robots.episodes (id) VALUES (?) RETURNING id",
            "INSERT INTO robots.episodes (id) VALUES (?) ON CONFLICT DO NOTHING",
            "INSERT INTO robots.episodes (id, ID) VALUES (?, ?)",
            "/* x */ INSERT INTO robots.episodes (id) VALUES ($1)",
        ] {
            assert!(
                matches!(parse_insert(sql), Err(SdkError::UnsupportedSyntax(_))),
                "{sql}"
            );
        }
    }

    #[test]
    fn names_resolve_as_datafusion_resolves_them() {
        let s = parse_insert("INSERT INTO Robots.Episodes (ID, \"Camera\") VALUES (?, ?)").unwrap();
        assert_eq!(s.table, "robots.episodes");
        assert_eq!(s.columns, vec!["id", "Camera"]);
        let s = parse_insert("INSERT INTO robots.episodes (id) /* one row */ VALUES (?)").unwrap();
        assert_eq!(s.columns, vec!["id"]);
    }
}
