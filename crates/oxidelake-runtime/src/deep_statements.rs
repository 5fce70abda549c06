//! Statements that nest deeply: the estimate of their depth, and the check that refuses
//! those too deep to plan.
//!
//! DataFusion plans and evaluates expression trees recursively. A flat chain such as
//! `SELECT 1+1+…+1` or `q UNION ALL q UNION ALL …` parses (iteratively) into a tree as
//! deep as the chain is long, and the recursions over that tree (rewrites, `Clone`,
//! `Hash`, `Drop`, evaluation) take stack in proportion to its depth: 2,000 terms
//! overflowed the 8 MiB main thread of a dev build, which aborts the process (SIGABRT,
//! issue 44). Parentheses, unary operators and nested CASEs cannot nest that deep:
//! DataFusion's parser refuses more than `datafusion.sql_parser.recursion_limit` (50)
//! levels of them.
//!
//! So OxideLake
//! 1. plans statements on a thread with a large stack and runs operators on tokio
//!    threads with large stacks (`crate::runtime_threads`: [`crate::PLANNING_STACK_BYTES`],
//!    [`crate::RUNTIME_STACK_BYTES`]);
//! 2. refuses, before parsing, a statement whose estimated depth passes
//!    [`MAX_STATEMENT_DEPTH`] ([`check_statement_depth`]), with an error that says so:
//!    every `OxideSession` statement (`OxideSession::check_statement_depth`) and every
//!    statement a Flight SQL client sends the scheduler (`cluster::flight_sql`).
//!
//! The limit is above what datafusion-python 55 answers (8,000 terms, 3,000 unions)
//! and far below what the stacks hold: more than 100 KiB of planning stack and 25 KiB
//! of runtime stack per level.
//!
//! The depth is estimated from the tokens, without building the tree (whose `Drop`
//! alone would recurse), as sqlparser's Pratt parser would nest them: within each
//! parenthesised level (and each CASE … END), the binary operators of one expression
//! (between commas and clause keywords) are ranked in sqlparser's precedence tiers
//! (`Tier`); a left-deep chain of one tier nests once per operator, and an operand
//! made of tighter operators (`x = 1` in `x = 1 OR x = 2`) adds its own depth to the
//! chain, not a running sum: an N-term `x = 1 OR … OR x = N` is N deep, as its tree is.
//! A parenthesised part or a CASE counts as deep as what it holds, plus one; the set
//! operations (UNION, INTERSECT, EXCEPT) that chain a level's queries add one each.
//!
//! The check covers chains of what the estimate models, not every deep statement:
//! `OR`, `AND`, `XOR`; comparisons and `:=`; `BETWEEN`, `IN`, `OVERLAPS`; the `LIKE`
//! family; `IS …` (`IS DISTINCT FROM` too) and the postfix `NOT NULL` and `NOTNULL`;
//! arithmetic, bitwise, `||`, `DIV`; `AT TIME ZONE`; `::`, subscripts and postfix `!`;
//! PostgreSQL's JSON, geometric and custom operators; and the set operations. Unary
//! operators and a prefix `NOT` are not counted (the recursion limit bounds them).

use datafusion::config::Dialect as DialectName;
use datafusion::sql::sqlparser::dialect::{GenericDialect, dialect_from_str};
use datafusion::sql::sqlparser::tokenizer::Tokenizer;
use oxidelake_core::EngineError;

mod estimate;

/// The deepest statement OxideLake plans, as [`statement_depth`] estimates it.
pub const MAX_STATEMENT_DEPTH: usize = 10_000;

/// The estimated depth of the expression tree `sql` parses into, in the dialect
/// named `dialect` (`datafusion.sql_parser.dialect`; unknown names are `generic`);
/// `None` when the text does not tokenize (the parser then reports why).
pub fn statement_depth(sql: &str, dialect: &str) -> Option<usize> {
    let dialect = dialect_from_str(dialect).unwrap_or_else(|| Box::new(GenericDialect {}));
    let tokens = Tokenizer::new(dialect.as_ref(), sql).tokenize().ok()?;
    Some(estimate::depth(&tokens))
}

/// Refuses `sql` when its estimated depth passes [`MAX_STATEMENT_DEPTH`], naming the
/// depth and the limit; text that does not tokenize passes (the parser says why).
pub fn check_statement_depth(sql: &str, dialect: &str) -> Result<(), EngineError> {
    match statement_depth(sql, dialect) {
        Some(depth) if depth > MAX_STATEMENT_DEPTH => Err(EngineError::InvalidArgument {
            what: "statement",
            detail: format!(
                "it nests about {depth} levels deep: each link of a chain of operators \
                 or set operations (UNION, INTERSECT, EXCEPT) nests it one level deeper; \
                 OxideLake plans at most {MAX_STATEMENT_DEPTH} levels: split the chain \
                 (many values fit an IN list or a table)"
            ),
        }),
        _ => Ok(()),
    }
}

/// [`check_statement_depth`] in every dialect DataFusion can parse in, for a caller
/// that cannot know which one its statement will be parsed in: the scheduler's Flight
/// SQL frontend, whose clients can `SET datafusion.sql_parser.dialect` in their own
/// sessions. The dialects tokenize comments, quotes and escapes differently, so text
/// that one reads as a comment or a string (or cannot tokenize at all) can be a deep
/// expression in another. Tokenizes `sql` once per dialect.
pub fn check_statement_depth_in_every_dialect(sql: &str) -> Result<(), EngineError> {
    for info in DialectName::metadata() {
        check_statement_depth(sql, info.canonical_name)?;
    }
    Ok(())
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

    /// `SELECT * FROM t WHERE x = 1 OR x = 2 OR … OR x = terms`.
    fn or_chain(terms: usize) -> String {
        let terms: Vec<String> = (1..=terms).map(|i| format!("x = {i}")).collect();
        format!("SELECT * FROM t WHERE {}", terms.join(" OR "))
    }

    #[test]
    fn a_chain_of_n_terms_is_about_n_deep() {
        assert_eq!(statement_depth(&chain(8_000, "+"), "generic"), Some(7_999));
        assert_eq!(statement_depth(&chain(5, " || "), "generic"), Some(4));
    }

    #[test]
    fn an_or_chain_of_comparisons_is_as_deep_as_its_terms_not_its_operators() {
        // OR(OR(x = 1, x = 2), x = 3): each OR one level, the comparisons one more.
        assert_eq!(statement_depth(&or_chain(3), "generic"), Some(3));
        assert_eq!(statement_depth(&or_chain(8_000), "generic"), Some(8_000));
        assert!(check_statement_depth(&or_chain(8_000), "generic").is_ok());
    }

    #[test]
    fn tighter_operators_in_each_operand_add_their_own_depth_not_a_running_sum() {
        // ((a * b) + (c * d)) + (e * f).
        assert_eq!(
            statement_depth("SELECT a * b + c * d + e * f", "generic"),
            Some(3)
        );
        // Three comparisons of sums, two ANDs: the sums and comparisons nest inside
        // the AND chain once, not once per term.
        assert_eq!(
            statement_depth("SELECT a + 1 = b AND c + 1 = d AND e + 1 = f", "generic"),
            Some(4)
        );
        // BETWEEN's AND joins its bounds, not two conditions.
        assert_eq!(
            statement_depth("SELECT x BETWEEN 1 AND 2 AND y BETWEEN 3 AND 4", "generic"),
            Some(2)
        );
    }

    #[test]
    fn a_chain_is_counted_through_case_operands_distinct_from_and_subscripts() {
        let cases = format!(
            "SELECT 1{}",
            " + CASE WHEN b THEN 1 ELSE 2 END".repeat(20_000)
        );
        let distinct: Vec<String> = (0..20_000)
            .map(|i| format!("x IS NOT DISTINCT FROM {i}"))
            .collect();
        let distinct = format!("SELECT * FROM t WHERE {}", distinct.join(" OR "));
        let subscripts = format!("SELECT a{} FROM t", "[1]".repeat(20_000));
        for sql in [cases, distinct, subscripts] {
            let depth = statement_depth(&sql, "generic").unwrap();
            assert!(depth >= 20_000, "{depth}: {sql:.80}");
            assert!(check_statement_depth(&sql, "generic").is_err(), "{sql:.80}");
        }
    }

    #[test]
    fn postfix_null_tests_and_assignments_nest_once_per_link() {
        assert_eq!(
            statement_depth("SELECT x NOT NULL NOT NULL", "generic"),
            Some(2)
        );
        assert_eq!(
            statement_depth("SELECT x IS NULL IS NULL", "generic"),
            Some(2)
        );
        assert_eq!(statement_depth("SELECT x IS NOT NULL", "generic"), Some(1));
        assert_eq!(statement_depth("SELECT a := 1 := 2", "generic"), Some(2));
        assert_eq!(
            statement_depth("SELECT x NOTNULL NOTNULL", "postgresql"),
            Some(2)
        );
    }

    #[test]
    fn chains_of_postfix_null_tests_and_assignments_are_refused() {
        let not_null = format!("SELECT * FROM t WHERE x{}", " NOT NULL".repeat(20_000));
        let is_null = format!("SELECT * FROM t WHERE x{}", " IS NULL".repeat(20_000));
        let assignments = format!("SELECT a{}", " := 1".repeat(20_000));
        for sql in [&not_null, &is_null, &assignments] {
            let depth = statement_depth(sql, "generic").unwrap();
            assert!(depth >= 20_000, "{depth}: {sql:.80}");
            assert!(check_statement_depth(sql, "generic").is_err(), "{sql:.80}");
            assert!(
                check_statement_depth_in_every_dialect(sql).is_err(),
                "{sql:.80}"
            );
        }
        // `NOTNULL` is an operator in these dialects (a name in the others).
        let notnull = format!("SELECT * FROM t WHERE x{}", " NOTNULL".repeat(20_000));
        for dialect in ["postgresql", "duckdb", "sqlite"] {
            let depth = statement_depth(&notnull, dialect).unwrap();
            assert!(depth >= 20_000, "{dialect}: {depth}");
            assert!(
                check_statement_depth(&notnull, dialect).is_err(),
                "{dialect}"
            );
        }
        assert!(check_statement_depth_in_every_dialect(&notnull).is_err());
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
            err.contains("about 20000 levels") && err.contains("at most 10000"),
            "{err}"
        );
    }

    #[test]
    fn text_that_does_not_tokenize_is_left_to_the_parser() {
        assert_eq!(statement_depth("SELECT 'open", "generic"), None);
        assert!(check_statement_depth("SELECT 'open", "generic").is_ok());
    }

    #[test]
    fn a_chain_one_dialect_reads_as_a_comment_is_refused_in_every_dialect() {
        // The generic dialect nests block comments: the chain is inside one. MySQL does
        // not, and parses the chain.
        let sql = format!("SELECT 1 /* /* */ {} */", "+1".repeat(20_000));
        assert!(check_statement_depth(&sql, "generic").is_ok());
        assert!(check_statement_depth(&sql, "mysql").is_err());
        assert!(check_statement_depth_in_every_dialect(&sql).is_err());
        assert!(check_statement_depth_in_every_dialect(&or_chain(8_000)).is_ok());
    }
}
