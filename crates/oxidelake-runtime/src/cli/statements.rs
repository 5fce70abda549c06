//! Splitting input into SQL statements at the `;` tokens sqlparser's tokenizer finds, so
//! a `;` inside a string, a quoted name, a `--` or `/* */` comment or a dollar-quoted
//! body never ends a statement, in whichever dialect the session parses.

use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect, dialect_from_str};
use datafusion::sql::sqlparser::tokenizer::{Location, Token, Tokenizer};

/// Feeds text in, gets complete statements out; what follows the last `;` waits for
/// more input (multi-line statements in the REPL).
pub struct StatementSplitter {
    pending: String,
    dialect: Box<dyn Dialect>,
    /// Whether `pending` holds more than blanks and comments.
    has_content: bool,
}

impl std::fmt::Debug for StatementSplitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatementSplitter")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl Default for StatementSplitter {
    /// DataFusion's default dialect, `generic`.
    fn default() -> Self {
        Self {
            pending: String::new(),
            dialect: Box::new(GenericDialect {}),
            has_content: false,
        }
    }
}

/// Char offsets of each line's start in `text` (the tokenizer's locations are 1-based
/// line and char column).
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    for (i, c) in text.chars().enumerate() {
        if c == '\n' {
            starts.push(i + 1);
        }
    }
    starts
}

fn char_offset(starts: &[usize], at: Location) -> usize {
    let line = usize::try_from(at.line).unwrap_or(1).max(1);
    let column = usize::try_from(at.column).unwrap_or(1).max(1);
    starts.get(line - 1).copied().unwrap_or(0) + column - 1
}

/// Whitespace, comments (the tokenizer's whitespace too) and the end.
fn is_blank(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_) | Token::EOF)
}

impl StatementSplitter {
    /// A splitter for DataFusion's dialect `name` (`datafusion.sql_parser.dialect`);
    /// an unknown name falls back to `generic`.
    pub fn for_dialect(name: &str) -> Self {
        Self {
            pending: String::new(),
            dialect: dialect_from_str(name).unwrap_or_else(|| Box::new(GenericDialect {})),
            has_content: false,
        }
    }

    /// Adds `text` (one or more lines) and returns the statements it completed. Text
    /// the tokenizer cannot finish (an open quote or comment) waits for more.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        self.pending.push('\n');
        // Only a `;` token ends a statement, and a line without a `;` cannot bring one:
        // the buffer is tokenized again only when one arrives, so a long statement fed a
        // line at a time (a script's INSERT of many rows) costs linear time, not
        // quadratic.
        if !text.contains(';') {
            self.has_content |= self.holds_content(text);
            return Vec::new();
        }
        self.split()
    }

    /// Whether `text` alone holds more than blanks and comments (text that does not
    /// tokenize, such as an open quote, does).
    fn holds_content(&self, text: &str) -> bool {
        match Tokenizer::new(self.dialect.as_ref(), text).tokenize() {
            Ok(tokens) => tokens.iter().any(|t| !is_blank(t)),
            Err(_) => !text.trim().is_empty(),
        }
    }

    /// Takes the complete statements out of the buffer.
    fn split(&mut self) -> Vec<String> {
        let Ok(tokens) = Tokenizer::new(self.dialect.as_ref(), &self.pending)
            .with_unescape(false)
            .tokenize_with_location()
        else {
            self.has_content = !self.pending.trim().is_empty();
            return Vec::new();
        };
        let chars: Vec<char> = self.pending.chars().collect();
        let starts = line_starts(&self.pending);
        let mut done = Vec::new();
        let (mut start, mut has_content) = (0, false);
        for token in &tokens {
            match &token.token {
                Token::SemiColon => {
                    let end = char_offset(&starts, token.span.start);
                    if has_content {
                        let statement: String = chars[start..end].iter().collect();
                        done.push(statement.trim().to_string());
                    }
                    (start, has_content) = (end + 1, false);
                }
                other => has_content |= !is_blank(other),
            }
        }
        self.pending = chars[start.min(chars.len())..].iter().collect();
        self.has_content = has_content;
        done
    }

    /// Whether a statement is partly typed (anything but blanks and comments, or an
    /// open quote or comment).
    pub fn is_pending(&self) -> bool {
        self.has_content
    }

    /// Drops what is partly typed.
    pub fn clear(&mut self) {
        self.pending.clear();
        self.has_content = false;
    }

    /// Everything still buffered at the end of the input: the complete statements, then
    /// what follows the last `;`.
    pub fn finish(&mut self) -> Vec<String> {
        let mut done = self.split();
        let rest = std::mem::take(&mut self.pending);
        if self.holds_content(&rest) {
            done.push(rest.trim().to_string());
        }
        self.has_content = false;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_semicolons_outside_quotes_and_comments() {
        let mut s = StatementSplitter::default();
        assert!(s.push("SELECT 'a;b' AS x, -- not; the end").is_empty());
        assert!(s.is_pending());
        assert_eq!(
            s.push("1 AS y; SELECT 2;"),
            vec![
                "SELECT 'a;b' AS x, -- not; the end\n1 AS y".to_string(),
                "SELECT 2".to_string()
            ]
        );
        assert!(!s.is_pending());
        s.push("SELECT 3");
        assert_eq!(s.finish(), vec!["SELECT 3".to_string()]);
    }

    #[test]
    fn a_semicolon_inside_a_block_comment_does_not_split() {
        let mut s = StatementSplitter::default();
        assert_eq!(
            s.push("SELECT /* a; b */ 1; SELECT 2;"),
            vec!["SELECT /* a; b */ 1".to_string(), "SELECT 2".to_string()]
        );
    }

    #[test]
    fn an_open_block_comment_or_quote_waits_for_the_next_line() {
        let mut s = StatementSplitter::default();
        assert!(s.push("SELECT 1 /* a;").is_empty());
        assert!(s.is_pending());
        assert_eq!(s.push("b */;"), vec!["SELECT 1 /* a;\nb */".to_string()]);
        assert!(s.push("SELECT 'it''s;").is_empty());
        assert_eq!(s.push("ok';"), vec!["SELECT 'it''s;\nok'".to_string()]);
    }

    #[test]
    fn quoted_names_and_multibyte_text_keep_their_bytes() {
        let mut s = StatementSplitter::default();
        assert_eq!(
            s.push("SELECT 'héllo; wörld' AS \"a;b\"; SELECT 'ß';"),
            vec![
                "SELECT 'héllo; wörld' AS \"a;b\"".to_string(),
                "SELECT 'ß'".to_string()
            ]
        );
    }

    #[test]
    fn a_statement_left_before_an_open_quote_runs_at_the_end_of_input() {
        let mut s = StatementSplitter::default();
        assert!(s.push("SELECT 1; SELECT 'a").is_empty());
        assert!(s.push("b'").is_empty());
        assert!(s.is_pending());
        assert_eq!(
            s.finish(),
            vec!["SELECT 1".to_string(), "SELECT 'a\nb'".to_string()]
        );
    }

    #[test]
    fn comments_and_empty_statements_are_not_statements() {
        let mut s = StatementSplitter::default();
        assert!(s.push("-- just a note").is_empty());
        assert!(!s.is_pending());
        assert_eq!(s.push(";; SELECT 1;"), vec!["SELECT 1".to_string()]);
        s.push("/* trailing */");
        assert!(s.finish().is_empty());
    }

    #[test]
    fn a_dollar_quoted_body_keeps_its_semicolons() {
        let mut s = StatementSplitter::for_dialect("postgresql");
        assert_eq!(
            s.push("SELECT $$a;b$$; SELECT 2;"),
            vec!["SELECT $$a;b$$".to_string(), "SELECT 2".to_string()]
        );
    }
}
