//! Plain `EXPLAIN <query>` answered with the placement-annotated plan.

use std::sync::Arc;

use arrow::array::StringArray;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::common::format::ExplainStatementOptions;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement as DFStatement;
use oxidelake_core::EngineError;

use super::OxideSession;

impl OxideSession {
    /// The plan of the statement a plain `EXPLAIN <statement>` explains (no ANALYZE,
    /// VERBOSE or FORMAT, in keyword or `EXPLAIN (…)` form), read by DataFusion's own
    /// parser in the session's dialect; `None` for every other statement, and for text
    /// that does not parse (DataFusion then reports the error as it would anyway).
    pub(super) async fn plain_explain_target(
        &self,
        sql: &str,
    ) -> Result<Option<LogicalPlan>, EngineError> {
        let state = self.ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let Ok(DFStatement::Explain(explain)) = state.sql_to_statement(sql, &dialect) else {
            return Ok(None);
        };
        if explain.options != ExplainStatementOptions::default() {
            return Ok(None);
        }
        Ok(Some(state.statement_to_plan(*explain.statement).await?))
    }
}

/// The plan text as DataFusion's EXPLAIN layout: `plan_type`, `plan`.
pub(super) fn as_batches(text: &str) -> Result<Vec<RecordBatch>, EngineError> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("plan_type", DataType::Utf8, false),
        Field::new("plan", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec!["physical_plan"])),
            Arc::new(StringArray::from(vec![text])),
        ],
    )?;
    Ok(vec![batch])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_plain_explain_is_intercepted_in_either_syntax() {
        let session = OxideSession::local();
        let plain = |sql: &'static str| {
            let session = session.clone();
            async move { session.plain_explain_target(sql).await.unwrap().is_some() }
        };
        assert!(plain("  explain SELECT 1").await);
        assert!(plain("EXPLAIN\n  SELECT 1 -- why").await);
        assert!(plain("/* a; b */ EXPLAIN SELECT 1").await);
        assert!(!plain("EXPLAIN ANALYZE SELECT 1").await);
        assert!(!plain("EXPLAIN (ANALYZE) SELECT 1").await);
        assert!(!plain("EXPLAIN (ANALYZE true, VERBOSE) SELECT 1").await);
        assert!(!plain("explain verbose SELECT 1").await);
        assert!(!plain("EXPLAIN FORMAT tree SELECT 1").await);
        assert!(!plain("SELECT 1").await);
        assert!(!plain("EXPLAIN").await);
    }
}
