//! Statements that nest deeply, and the stacks that plan and run them.
//!
//! DataFusion plans and evaluates expression trees recursively. A flat chain such as
//! `SELECT 1+1+…+1` or `q UNION ALL q UNION ALL …` parses (iteratively) into a tree as
//! deep as the chain is long, and the recursions over that tree (rewrites, `Clone`,
//! `Hash`, `Drop`, evaluation) take stack in proportion to its depth: 2,000 terms
//! overflowed the 8 MiB main thread of a dev build, which aborts the process (SIGABRT,
//! issue 44). Parentheses, CASE and unary operators cannot nest that deep: DataFusion's
//! parser refuses more than `datafusion.sql_parser.recursion_limit` (50) levels of them.
//!
//! So OxideLake
//! 1. plans statements on a thread with a large stack ([`PLANNING_STACK_BYTES`]:
//!    `oxide` runs each command there, [`run_with_planning_stack`]) and runs operators
//!    on tokio threads with large stacks ([`RUNTIME_STACK_BYTES`]: `oxide`, the
//!    scheduler, the workers, the Python API);
//! 2. refuses, before parsing, a statement whose estimated depth passes
//!    [`MAX_STATEMENT_DEPTH`] ([`check_statement_depth`]), with an error that says so.
//!
//! The limit is above what datafusion-python 55 answers (8,000 terms, 3,000 unions)
//! and far below what the stacks hold: more than 100 KiB of planning stack and 25 KiB
//! of runtime stack per level. A thread's stack is reserved address space; only the
//! pages a deep statement touches take memory.
//!
//! The depth is estimated from the tokens, without building the tree (whose `Drop`
//! alone would recurse): within each parenthesised level, the binary operators of one
//! expression (between commas and clause keywords) plus the depth of its deepest
//! parenthesised part, plus the set operations that chain that level's queries. It
//! over-counts mixed precedence (`a = 1 OR a = 2` counts 3 where the tree is 2 deep)
//! and counts the parts of a chain that a CASE interrupts separately (its branches
//! are separate trees); the stacks leave room for either.

use datafusion::sql::sqlparser::dialect::{GenericDialect, dialect_from_str};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use oxidelake_core::EngineError;

/// The deepest statement OxideLake plans, as [`statement_depth`] estimates it.
pub const MAX_STATEMENT_DEPTH: usize = 10_000;

/// The stack of the thread `oxide` plans its statements on (1 GiB).
pub const PLANNING_STACK_BYTES: usize = 1 << 30;

/// The stack of each tokio thread that plans or runs queries (256 MiB).
pub const RUNTIME_STACK_BYTES: usize = 256 << 20;

/// The estimated depth of the expression tree `sql` parses into, in the dialect
/// named `dialect` (`datafusion.sql_parser.dialect`; unknown names are `generic`);
/// `None` when the text does not tokenize (the parser then reports why).
pub fn statement_depth(sql: &str, dialect: &str) -> Option<usize> {
    let dialect = dialect_from_str(dialect).unwrap_or_else(|| Box::new(GenericDialect {}));
    let tokens = Tokenizer::new(dialect.as_ref(), sql).tokenize().ok()?;
    let mut levels = vec![Level::default()];
    for token in &tokens {
        match token {
            Token::LParen | Token::LBracket | Token::LBrace => levels.push(Level::default()),
            Token::RParen | Token::RBracket | Token::RBrace => close(&mut levels),
            _ => {
                if let Some(level) = levels.last_mut() {
                    level.add(token);
                }
            }
        }
    }
    while levels.len() > 1 {
        close(&mut levels);
    }
    Some(levels.last().map_or(0, Level::depth))
}

/// Refuses `sql` when its estimated depth passes [`MAX_STATEMENT_DEPTH`], naming the
/// depth and the limit; text that does not tokenize passes (the parser says why).
pub fn check_statement_depth(sql: &str, dialect: &str) -> Result<(), EngineError> {
    match statement_depth(sql, dialect) {
        Some(depth) if depth > MAX_STATEMENT_DEPTH => Err(EngineError::InvalidArgument {
            what: "statement",
            detail: format!(
                "it chains about {depth} operators or set operations (UNION, INTERSECT, \
                 EXCEPT) into one expression, which nests it that deep; OxideLake plans \
                 at most {MAX_STATEMENT_DEPTH} levels: split the chain (many values fit \
                 an IN list or a table)"
            ),
        }),
        _ => Ok(()),
    }
}

/// Runs `work` on a thread with a [`PLANNING_STACK_BYTES`] stack and returns what it
/// returns; a panic in `work` continues on the caller's thread. Where no such thread
/// can be made (a tight address-space limit), a [`RUNTIME_STACK_BYTES`] one is tried,
/// then the caller's thread.
pub fn run_with_planning_stack<T, F>(work: F) -> Result<T, EngineError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
    for stack_bytes in [PLANNING_STACK_BYTES, RUNTIME_STACK_BYTES] {
        let slot = std::sync::Arc::clone(&work);
        let spawned = std::thread::Builder::new()
            .name("oxide-planner".into())
            .stack_size(stack_bytes)
            .spawn(move || take(&slot).map(|work| work()));
        match spawned {
            Ok(thread) => match thread.join() {
                Ok(Some(answer)) => return Ok(answer),
                Ok(None) => break,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(e) => tracing::warn!(
                stack_mib = stack_bytes >> 20,
                error = %e,
                "cannot start a thread with this stack; deep statements may overflow"
            ),
        }
    }
    // Each thread is joined before the next is tried, so the work is still here unless
    // a thread ran it.
    match take(&work) {
        Some(work) => Ok(work()),
        None => Err(EngineError::Internal(
            "the planning thread ended without running its work".into(),
        )),
    }
}

fn take<F>(slot: &std::sync::Mutex<Option<F>>) -> Option<F> {
    match slot.lock() {
        Ok(mut work) => work.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    }
}

/// One parenthesised level of a statement, as [`statement_depth`] reads it.
#[derive(Debug, Default)]
struct Level {
    /// Set operations (UNION, INTERSECT, EXCEPT) chaining this level's queries.
    set_ops: usize,
    /// The deepest expression this level has finished.
    deepest: usize,
    /// Binary operators of the expression being read.
    ops: usize,
    /// The depth of its deepest parenthesised part, plus one.
    inner: usize,
}

impl Level {
    fn depth(&self) -> usize {
        self.set_ops + self.deepest.max(self.ops + self.inner)
    }

    /// The expression being read ends (a comma, a clause keyword).
    fn end_expression(&mut self) {
        self.deepest = self.deepest.max(self.ops + self.inner);
        self.ops = 0;
        self.inner = 0;
    }

    fn add(&mut self, token: &Token) {
        match token {
            Token::Comma => self.end_expression(),
            Token::Word(word) => match word.keyword {
                Keyword::AND | Keyword::OR => self.ops += 1,
                Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT => {
                    self.set_ops += 1;
                    self.end_expression();
                }
                Keyword::SELECT
                | Keyword::FROM
                | Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::BY
                | Keyword::LIMIT
                | Keyword::OFFSET
                | Keyword::ON
                | Keyword::USING
                | Keyword::JOIN
                | Keyword::CASE
                | Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::END
                | Keyword::VALUES
                | Keyword::SET
                | Keyword::QUALIFY
                | Keyword::WINDOW
                | Keyword::PARTITION => self.end_expression(),
                _ => {}
            },
            token if is_binary_operator(token) => self.ops += 1,
            _ => {}
        }
    }
}

/// Ends the innermost level: its depth, plus one, is a part of the enclosing
/// expression. A closing bracket without an opening one is ignored.
fn close(levels: &mut Vec<Level>) {
    if levels.len() < 2 {
        return;
    }
    if let Some(inner) = levels.pop() {
        let depth = inner.depth() + 1;
        if let Some(outer) = levels.last_mut() {
            outer.inner = outer.inner.max(depth);
        }
    }
}

fn is_binary_operator(token: &Token) -> bool {
    matches!(
        token,
        Token::DoubleEq
            | Token::Eq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Spaceship
            | Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::DuckIntDiv
            | Token::Mod
            | Token::StringConcat
            | Token::DoubleColon
            | Token::Ampersand
            | Token::Pipe
            | Token::Caret
            | Token::ShiftLeft
            | Token::ShiftRight
            | Token::Arrow
            | Token::LongArrow
            | Token::HashArrow
            | Token::Tilde
            | Token::TildeAsterisk
            | Token::ExclamationMarkTilde
            | Token::ExclamationMarkTildeAsterisk
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(terms: usize, operator: &str) -> String {
        let mut sql = String::from("SELECT 1");
        for _ in 1..terms {
            sql.push_str(operator);
            sql.push('1');
        }
        sql
    }

    fn unions(queries: usize) -> String {
        vec!["SELECT 1 AS a, 2 AS b"; queries].join(" UNION ALL ")
    }

    #[test]
    fn a_chain_of_n_terms_is_about_n_deep() {
        assert_eq!(statement_depth(&chain(8_000, "+"), "generic"), Some(7_999));
        assert_eq!(statement_depth(&chain(5, " || "), "generic"), Some(4));
    }

    #[test]
    fn union_chains_count_across_their_select_lists() {
        assert_eq!(statement_depth(&unions(3_000), "generic"), Some(2_999));
    }

    #[test]
    fn wide_statements_stay_shallow() {
        let list = (0..200_000).map(|i| i.to_string()).collect::<Vec<_>>();
        let sql = format!("SELECT * FROM t WHERE x IN ({})", list.join(", "));
        assert!(statement_depth(&sql, "generic").unwrap() < 10, "{sql:.60}");
        let columns = (0..20_000).map(|i| format!("c{i} + 1")).collect::<Vec<_>>();
        let sql = format!("SELECT {} FROM t", columns.join(", "));
        assert!(statement_depth(&sql, "generic").unwrap() < 10);
        let branches = (0..20_000)
            .map(|i| format!("WHEN k = {i} THEN {i}"))
            .collect::<Vec<_>>();
        let sql = format!("SELECT CASE {} END FROM t", branches.join(" "));
        assert!(statement_depth(&sql, "generic").unwrap() < 10);
    }

    #[test]
    fn parentheses_add_the_depth_of_what_they_hold() {
        assert_eq!(
            statement_depth("SELECT (1 + (2 + 3)) * 4", "generic"),
            Some(5)
        );
        assert_eq!(
            statement_depth("SELECT f(a + b + c, d)", "generic"),
            Some(3)
        );
    }

    #[test]
    fn a_statement_deeper_than_the_limit_is_refused_and_the_bar_passes() {
        assert!(check_statement_depth(&chain(8_000, "+"), "generic").is_ok());
        assert!(check_statement_depth(&unions(3_000), "generic").is_ok());
        let err = check_statement_depth(&chain(20_001, "+"), "generic")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("about 20000 operators") && err.contains("at most 10000"),
            "{err}"
        );
    }

    #[test]
    fn text_that_does_not_tokenize_is_left_to_the_parser() {
        assert_eq!(statement_depth("SELECT 'open", "generic"), None);
        assert!(check_statement_depth("SELECT 'open", "generic").is_ok());
    }

    #[test]
    fn work_runs_on_a_thread_with_the_planning_stack() {
        // Deeper than the 2 MiB of a test thread can hold: 64 KiB a level, 256 levels.
        fn deep(levels: usize) -> usize {
            let frame = std::hint::black_box([0_u8; 64 * 1024]);
            if levels == 0 {
                usize::from(frame[0])
            } else {
                deep(levels - 1) + 1 + usize::from(frame[levels % 1024])
            }
        }
        assert_eq!(run_with_planning_stack(|| deep(256)).unwrap(), 256);
        let name =
            run_with_planning_stack(|| std::thread::current().name().map(String::from)).unwrap();
        assert_eq!(name.as_deref(), Some("oxide-planner"));
    }
}
