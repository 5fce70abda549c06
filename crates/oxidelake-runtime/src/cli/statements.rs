//! Splitting input into SQL statements at `;` (outside quotes and comments).

/// Feeds text in, gets complete statements out; what follows the last `;` waits for
/// more input (multi-line statements in the REPL).
#[derive(Debug, Default)]
pub struct StatementSplitter {
    pending: String,
}

impl StatementSplitter {
    /// Adds `text` (one or more lines) and returns the statements it completed.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        self.pending.push('\n');
        let mut done = Vec::new();
        let (mut in_single, mut in_double, mut in_comment) = (false, false, false);
        let mut start = 0;
        let bytes: Vec<char> = self.pending.chars().collect();
        let mut i = 0;
        let mut consumed_chars = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if in_comment {
                if c == '\n' {
                    in_comment = false;
                }
            } else if in_single {
                in_single = c != '\'';
            } else if in_double {
                in_double = c != '"';
            } else if c == '-' && bytes.get(i + 1) == Some(&'-') {
                in_comment = true;
            } else if c == '\'' {
                in_single = true;
            } else if c == '"' {
                in_double = true;
            } else if c == ';' {
                let statement: String = bytes[start..i].iter().collect();
                if !statement.trim().is_empty() {
                    done.push(statement.trim().to_string());
                }
                start = i + 1;
                consumed_chars = start;
            }
            i += 1;
        }
        self.pending = bytes[consumed_chars..].iter().collect();
        done
    }

    /// Whether a statement is partly typed.
    pub fn is_pending(&self) -> bool {
        !self.pending.trim().is_empty()
    }

    /// What is left without a terminating `;` (run at end of input).
    pub fn take_rest(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let rest = rest.trim();
        (!rest.is_empty()).then(|| rest.trim_end_matches(';').to_string())
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
        assert_eq!(s.take_rest(), Some("SELECT 3".to_string()));
    }
}
