//! Plain `EXPLAIN <query>` answered with the placement-annotated plan.

use std::sync::Arc;

use arrow::array::StringArray;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

/// The query of a plain `EXPLAIN <query>` (not ANALYZE, VERBOSE or FORMAT), if `sql` is one.
pub(super) fn plain_explain_target(sql: &str) -> Option<&str> {
    let trimmed = sql.trim_start();
    let (head, rest) = trimmed.split_at(trimmed.find(char::is_whitespace)?);
    if !head.eq_ignore_ascii_case("explain") {
        return None;
    }
    let rest = rest.trim_start();
    let next = rest.split_whitespace().next()?.to_ascii_uppercase();
    if matches!(next.as_str(), "ANALYZE" | "VERBOSE" | "FORMAT") {
        return None;
    }
    Some(rest)
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

    #[test]
    fn only_plain_explain_is_intercepted() {
        assert_eq!(plain_explain_target("  explain SELECT 1"), Some("SELECT 1"));
        assert_eq!(plain_explain_target("EXPLAIN ANALYZE SELECT 1"), None);
        assert_eq!(plain_explain_target("explain verbose SELECT 1"), None);
        assert_eq!(plain_explain_target("SELECT 1"), None);
        assert_eq!(plain_explain_target("EXPLAIN"), None);
    }
}
