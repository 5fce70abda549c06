//! The INSERT grammar the SDK accepts, deliberately narrow:
//!
//! ```text
//! INSERT INTO <namespace>.<table> (<column>, ...) VALUES (?, ...) [;]
//! ```
//!
//! One row, placeholders only (values travel as typed parameters, never as SQL text),
//! identifiers `[A-Za-z_][A-Za-z0-9_]*`, keywords in any case. Anything else is refused
//! before any parameter is looked at, so an unsupported statement never starts an upload.

use crate::SdkError;

/// A parsed INSERT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertStatement {
    /// `namespace.table`.
    pub table: String,
    /// The columns, in statement order.
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Dot,
    Comma,
    Open,
    Close,
    Placeholder,
    Semicolon,
}

fn unsupported(detail: impl Into<String>) -> SdkError {
    SdkError::UnsupportedSyntax(detail.into())
}

fn tokens(sql: &str) -> Result<Vec<Token>, SdkError> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '.' | ',' | '(' | ')' | '?' | ';' => {
                chars.next();
                out.push(match c {
                    '.' => Token::Dot,
                    ',' => Token::Comma,
                    '(' => Token::Open,
                    ')' => Token::Close,
                    '?' => Token::Placeholder,
                    _ => Token::Semicolon,
                });
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        word.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Word(word));
            }
            other => {
                return Err(unsupported(format!(
                    "unexpected {other:?}: only `INSERT INTO ns.table (columns) VALUES (?, ...)` \
                     with ? placeholders is accepted"
                )));
            }
        }
    }
    Ok(out)
}

struct Cursor {
    tokens: Vec<Token>,
    at: usize,
}

impl Cursor {
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn keyword(&mut self, word: &str) -> Result<(), SdkError> {
        match self.next() {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(word) => Ok(()),
            other => Err(unsupported(format!("expected {word}, found {other:?}"))),
        }
    }

    fn expect(&mut self, token: Token, what: &str) -> Result<(), SdkError> {
        match self.next() {
            Some(t) if t == token => Ok(()),
            other => Err(unsupported(format!("expected {what}, found {other:?}"))),
        }
    }

    fn identifier(&mut self, what: &str) -> Result<String, SdkError> {
        match self.next() {
            Some(Token::Word(w)) => Ok(w),
            other => Err(unsupported(format!("expected {what}, found {other:?}"))),
        }
    }
}

/// Parses `sql` as the narrow INSERT.
pub fn parse_insert(sql: &str) -> Result<InsertStatement, SdkError> {
    let mut c = Cursor {
        tokens: tokens(sql)?,
        at: 0,
    };
    c.keyword("INSERT")?;
    c.keyword("INTO")?;
    let namespace = c.identifier("a namespace")?;
    c.expect(Token::Dot, "`.` between namespace and table (ns.table)")?;
    let table = c.identifier("a table name")?;
    c.expect(Token::Open, "`(` and the column list")?;
    let mut columns = vec![c.identifier("a column name")?];
    loop {
        match c.next() {
            Some(Token::Comma) => columns.push(c.identifier("a column name")?),
            Some(Token::Close) => break,
            other => return Err(unsupported(format!("expected `,` or `)`, found {other:?}"))),
        }
    }
    c.keyword("VALUES")?;
    c.expect(Token::Open, "`(` and the placeholders")?;
    let mut placeholders = 0usize;
    loop {
        match c.next() {
            Some(Token::Placeholder) => placeholders += 1,
            other => {
                return Err(unsupported(format!(
                    "values must be ? placeholders, found {other:?}"
                )));
            }
        }
        match c.next() {
            Some(Token::Comma) => continue,
            Some(Token::Close) => break,
            other => return Err(unsupported(format!("expected `,` or `)`, found {other:?}"))),
        }
    }
    match c.next() {
        None | Some(Token::Semicolon) => {}
        Some(other) => {
            return Err(unsupported(format!(
                "one row only; unexpected {other:?} after VALUES (...)"
            )));
        }
    }
    if c.next().is_some() {
        return Err(unsupported("one statement only"));
    }
    if placeholders != columns.len() {
        return Err(SdkError::PlaceholderCount {
            columns: columns.len(),
            placeholders,
        });
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = columns
        .iter()
        .find(|c| !seen.insert(c.to_ascii_lowercase()))
    {
        return Err(unsupported(format!("column {dup} named twice")));
    }
    Ok(InsertStatement {
        table: format!("{namespace}.{table}"),
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
    }
}
