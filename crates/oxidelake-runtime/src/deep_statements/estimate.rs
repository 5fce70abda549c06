//! The depth estimate of [`super::statement_depth`]: sqlparser's Pratt parser replayed
//! over a statement's tokens, keeping only depths.
//!
//! A level is the statement, a bracketed part or a CASE … END. Within a level, an
//! expression runs between commas and clause keywords; its binary operators wait on a
//! stack for their right operand, as the parser's loop holds them, and a new operator
//! first closes those of its tier or a tighter one (left-associative, as the parser
//! builds `a + b + c` as `(a + b) + c`). Closing an operator makes a node one deeper
//! than the deeper of its operands. Tiers only rise up the stack, so it holds at most
//! one operator per tier, whatever the statement's length. A postfix operator (`IS
//! NULL`, `NOT NULL`, `NOTNULL`, a subscript) waits the same way, for an operand that
//! never comes: the next operator of its tier closes it one deeper, as the parser's
//! loop wraps `x NOT NULL NOT NULL` as `IsNotNull(IsNotNull(x))`.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

/// The estimated depth of the expression tree `tokens` parse into.
pub(super) fn depth(tokens: &[Token]) -> usize {
    let mut levels = vec![Level::new(Group::Statement)];
    for token in tokens {
        match token {
            Token::Whitespace(_) => {}
            Token::LParen | Token::LBrace => levels.push(Level::new(Group::Brackets)),
            Token::LBracket => {
                // A subscript (`a[1]`) binds as tightly as `::`; an array literal
                // counts one level too many.
                if let Some(level) = levels.last_mut() {
                    level.operator(Tier::Access);
                }
                levels.push(Level::new(Group::Brackets));
            }
            Token::RParen | Token::RBracket | Token::RBrace => close_brackets(&mut levels),
            Token::Word(word) if word.keyword == Keyword::CASE => {
                levels.push(Level::new(Group::Case));
            }
            Token::Word(word)
                if word.keyword == Keyword::END
                    && levels
                        .last()
                        .is_some_and(|level| level.group == Group::Case) =>
            {
                close(&mut levels);
            }
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
    levels.last().map_or(0, Level::depth)
}

/// The precedence tiers of binary operators, loosest first, as sqlparser's default
/// dialect ranks them (`Dialect::prec_value`): a chain of one tier nests once per
/// operator; an operand made of a tighter tier nests inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    /// `OR`.
    Or,
    /// `AND`.
    And,
    /// PostgreSQL's JSON and other operators (`->`, `->>`, `#>`, `@>`, `?`, …).
    PgOther,
    /// `IS`, and the postfix `NOT NULL` and `NOTNULL`.
    Is,
    /// `LIKE`, `ILIKE`, `SIMILAR TO`, `REGEXP`, …
    Like,
    /// Comparisons, `:=`, `BETWEEN`, `IN`.
    Comparison,
    /// `|` and PostgreSQL's geometric operators.
    Pipe,
    /// `^`, `#`, `<<`, `>>`.
    Caret,
    /// `&`.
    Ampersand,
    /// `XOR`.
    Xor,
    /// `+`, `-`.
    PlusMinus,
    /// `*`, `/`, `%`, `//`, `||`, `DIV`.
    MulDiv,
    /// `AT TIME ZONE`.
    AtTimeZone,
    /// `::`, subscripts, postfix `!`.
    Access,
}

/// The tier of `token` as a binary (or postfix) operator; `None` for every other token.
fn operator_tier(token: &Token) -> Option<Tier> {
    Some(match token {
        Token::Word(word) => match word.keyword {
            Keyword::OR => Tier::Or,
            Keyword::AND => Tier::And,
            // `NOTNULL` is an operator in DuckDB, PostgreSQL and SQLite only; elsewhere
            // it is a name, and counts one level too many.
            Keyword::IS | Keyword::NOTNULL => Tier::Is,
            Keyword::LIKE
            | Keyword::ILIKE
            | Keyword::RLIKE
            | Keyword::REGEXP
            | Keyword::MATCH
            | Keyword::SIMILAR
            | Keyword::MEMBER => Tier::Like,
            Keyword::IN | Keyword::BETWEEN | Keyword::OVERLAPS | Keyword::OPERATOR => {
                Tier::Comparison
            }
            Keyword::XOR => Tier::Xor,
            Keyword::DIV => Tier::MulDiv,
            Keyword::AT => Tier::AtTimeZone,
            _ => return None,
        },
        Token::Assignment
        | Token::Eq
        | Token::DoubleEq
        | Token::Neq
        | Token::Lt
        | Token::Gt
        | Token::LtEq
        | Token::GtEq
        | Token::Spaceship
        | Token::Tilde
        | Token::TildeAsterisk
        | Token::ExclamationMarkTilde
        | Token::ExclamationMarkTildeAsterisk
        | Token::DoubleTilde
        | Token::DoubleTildeAsterisk
        | Token::ExclamationMarkDoubleTilde
        | Token::ExclamationMarkDoubleTildeAsterisk => Tier::Comparison,
        Token::Pipe
        | Token::QuestionMarkDash
        | Token::DoubleSharp
        | Token::Overlap
        | Token::AmpersandLeftAngleBracket
        | Token::AmpersandRightAngleBracket
        | Token::QuestionMarkDashVerticalBar
        | Token::AmpersandLeftAngleBracketVerticalBar
        | Token::VerticalBarAmpersandRightAngleBracket
        | Token::TwoWayArrow
        | Token::LeftAngleBracketCaret
        | Token::RightAngleBracketCaret
        | Token::QuestionMarkSharp
        | Token::QuestionMarkDoubleVerticalBar
        | Token::QuestionPipe
        | Token::TildeEqual
        | Token::AtSign
        | Token::ShiftLeftVerticalBar
        | Token::VerticalBarShiftRight => Tier::Pipe,
        Token::Caret | Token::Sharp | Token::ShiftLeft | Token::ShiftRight => Tier::Caret,
        Token::Ampersand => Tier::Ampersand,
        Token::Plus | Token::Minus => Tier::PlusMinus,
        Token::Mul | Token::Div | Token::DuckIntDiv | Token::Mod | Token::StringConcat => {
            Tier::MulDiv
        }
        Token::DoubleColon | Token::ExclamationMark | Token::CaretAt => Tier::Access,
        Token::Arrow
        | Token::LongArrow
        | Token::HashArrow
        | Token::HashLongArrow
        | Token::AtArrow
        | Token::ArrowAt
        | Token::HashMinus
        | Token::AtQuestion
        | Token::AtAt
        | Token::Question
        | Token::QuestionAnd
        | Token::CustomBinaryOperator(_) => Tier::PgOther,
        _ => return None,
    })
}

/// What opened a level of a statement, and so what closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// The statement itself: never closed.
    Statement,
    /// `(`, `[` or `{`, closed by any closing bracket.
    Brackets,
    /// `CASE`, closed by `END`.
    Case,
}

/// An operator of the expression being read that waits for its right operand.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// The depth of its left operand.
    left: usize,
    tier: Tier,
}

/// One level of a statement (bracketed, or a CASE), as [`depth`] reads it.
#[derive(Debug)]
struct Level {
    group: Group,
    /// Set operations (UNION, INTERSECT, EXCEPT) chaining this level's queries.
    set_ops: usize,
    /// The deepest expression this level has finished.
    deepest: usize,
    /// The operators of the expression being read that wait for their right operand,
    /// loosest first: each tier at most once, so a handful at any time.
    pending: Vec<Pending>,
    /// The depth of the operand being read: its deepest parenthesised part or CASE.
    operand: usize,
    /// A `BETWEEN` waits for the `AND` between its bounds (not a boolean AND).
    between: bool,
    /// An `IS [NOT] DISTINCT` waits for its `FROM` (not a FROM clause).
    distinct_from: bool,
    /// The last token was a `NOT` not after `IS`: a `NULL` next is the postfix `NOT
    /// NULL` (parsed as `IS NOT NULL`); an `IN`, `BETWEEN` or `LIKE` next counts itself.
    after_not: bool,
}

impl Level {
    fn new(group: Group) -> Self {
        Self {
            group,
            set_ops: 0,
            deepest: 0,
            pending: Vec::new(),
            operand: 0,
            between: false,
            distinct_from: false,
            after_not: false,
        }
    }

    /// The depth of the expression being read, were it to end here: each pending
    /// operator takes what follows it as its right operand.
    fn expression_depth(&self) -> usize {
        self.pending
            .iter()
            .rev()
            .fold(self.operand, |right, pending| pending.left.max(right) + 1)
    }

    fn depth(&self) -> usize {
        self.set_ops + self.deepest.max(self.expression_depth())
    }

    /// The expression being read ends (a comma, a clause keyword).
    fn end_expression(&mut self) {
        self.deepest = self.deepest.max(self.expression_depth());
        self.pending.clear();
        self.operand = 0;
        self.between = false;
        self.distinct_from = false;
        self.after_not = false;
    }

    /// A binary operator of `tier`. The pending operators of its tier or a tighter one
    /// take the operand before it as their right operand, as the parser's loop closes
    /// them (left-associative); the result is its left operand.
    fn operator(&mut self, tier: Tier) {
        let mut left = self.operand;
        while let Some(pending) = self.pending.pop_if(|pending| pending.tier >= tier) {
            left = pending.left.max(left) + 1;
        }
        self.pending.push(Pending { left, tier });
        self.operand = 0;
    }

    /// A closed part `depth` deep (brackets, a CASE) is part of the operand being read.
    fn nested(&mut self, depth: usize) {
        self.operand = self.operand.max(depth);
    }

    fn add(&mut self, token: &Token) {
        let keyword = match token {
            Token::Word(word) => Some(word.keyword),
            _ => None,
        };
        let distinct_from = std::mem::take(&mut self.distinct_from);
        let after_not = std::mem::take(&mut self.after_not);
        match keyword {
            Some(Keyword::AND) if self.between => self.between = false,
            Some(Keyword::BETWEEN) => {
                self.operator(Tier::Comparison);
                self.between = true;
            }
            Some(Keyword::IS) => {
                self.operator(Tier::Is);
                self.distinct_from = true;
            }
            Some(Keyword::NOT | Keyword::DISTINCT) if distinct_from => {
                self.distinct_from = true;
            }
            Some(Keyword::FROM) if distinct_from => {}
            Some(Keyword::NOT) => self.after_not = true,
            Some(Keyword::NULL) if after_not => self.operator(Tier::Is),
            Some(Keyword::UNION | Keyword::INTERSECT | Keyword::EXCEPT) => {
                self.set_ops += 1;
                self.end_expression();
            }
            Some(
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
                | Keyword::WHEN
                | Keyword::THEN
                | Keyword::ELSE
                | Keyword::END
                | Keyword::VALUES
                | Keyword::SET
                | Keyword::QUALIFY
                | Keyword::WINDOW
                | Keyword::PARTITION,
            ) => self.end_expression(),
            _ if matches!(token, Token::Comma) => self.end_expression(),
            _ => {
                if let Some(tier) = operator_tier(token) {
                    self.operator(tier);
                }
            }
        }
    }
}

/// Ends the innermost level: its depth, plus one, is part of the operand the enclosing
/// level is reading. The statement's own level is never closed.
fn close(levels: &mut Vec<Level>) {
    if levels.len() < 2 {
        return;
    }
    if let Some(inner) = levels.pop() {
        let depth = inner.depth() + 1;
        if let Some(outer) = levels.last_mut() {
            outer.nested(depth);
        }
    }
}

/// A closing bracket: ends the innermost bracketed level and any CASE left open inside
/// it. A closing bracket without an opening one is ignored.
fn close_brackets(levels: &mut Vec<Level>) {
    if !levels.iter().any(|level| level.group == Group::Brackets) {
        return;
    }
    while let Some(group) = levels.last().map(|level| level.group) {
        if group == Group::Statement {
            break;
        }
        close(levels);
        if group == Group::Brackets {
            break;
        }
    }
}
