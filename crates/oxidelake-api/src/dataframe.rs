//! `DataFrame`: a lazy query over a `Session`.

use arrow::record_batch::RecordBatch;
use datafusion::common::JoinType;
use datafusion::dataframe::DataFrame as Plan;
use datafusion::prelude::Expr;
use oxidelake_runtime::{DistanceMetric, OxideSession};

use crate::Result;

/// A query, built step by step and run by [`DataFrame::collect`]. Each step returns a
/// new DataFrame; nothing runs until `collect` (or `explain` plans it).
#[derive(Debug, Clone)]
pub struct DataFrame {
    session: OxideSession,
    frame: Plan,
}

impl DataFrame {
    pub(crate) fn new(session: OxideSession, frame: Plan) -> Self {
        Self { session, frame }
    }

    /// One more step on the plan.
    fn then(self, step: impl FnOnce(Plan) -> datafusion::error::Result<Plan>) -> Result<Self> {
        let frame = step(self.frame)?;
        Ok(Self {
            session: self.session,
            frame,
        })
    }

    /// The underlying DataFusion DataFrame (for what this API does not cover).
    pub fn datafusion(&self) -> &Plan {
        &self.frame
    }

    /// Rows for which `predicate` is true.
    pub fn filter(self, predicate: Expr) -> Result<Self> {
        self.then(|f| f.filter(predicate))
    }

    /// Only the named columns, in this order.
    pub fn select(self, columns: &[&str]) -> Result<Self> {
        self.then(|f| f.select_columns(columns))
    }

    /// The inner join with `right` on `left_keys[i] = right_keys[i]`. The result runs in
    /// this DataFrame's session.
    pub fn join(self, right: DataFrame, left_keys: &[&str], right_keys: &[&str]) -> Result<Self> {
        self.then(|f| f.join(right.frame, JoinType::Inner, left_keys, right_keys, None))
    }

    /// One row per group of `group_by` with the `aggregates` (e.g. `sum(col("a"))`);
    /// an empty `group_by` aggregates all rows into one.
    pub fn aggregate(self, group_by: Vec<Expr>, aggregates: Vec<Expr>) -> Result<Self> {
        self.then(|f| f.aggregate(group_by, aggregates))
    }

    /// Adds column `alias`: the distance from each vector in `column` to `query`, with
    /// SQL's `l2_distance` (L2) or `cosine_distance` (Cosine) — Float64, NULL for a NULL
    /// vector (and, for cosine, a zero one). Over a `FixedSizeList<Float32>` column a
    /// GPU placement runs it as `GpuVectorDistanceExec`.
    pub fn vector_distance(
        self,
        column: &str,
        query: Vec<f32>,
        metric: DistanceMetric,
        alias: &str,
    ) -> Result<Self> {
        let expr = crate::vector::distance_expr(
            self.session.context(),
            self.frame.schema(),
            column,
            query,
            metric,
        )?;
        self.then(|f| f.with_column(alias, expr))
    }

    /// The physical plan as the session places it now, with a placement tag on every
    /// node and the reason for each eligible-looking node left on the CPU (what
    /// `EXPLAIN` prints in SQL).
    pub async fn explain(&self) -> Result<String> {
        self.session
            .explain_plan(self.frame.logical_plan().clone())
            .await
    }

    /// Runs the query with the session's current settings and returns its batches.
    pub async fn collect(self) -> Result<Vec<RecordBatch>> {
        let state = self.session.context().state();
        let plan = self.frame.into_unoptimized_plan();
        Ok(Plan::new(state, plan).collect().await?)
    }
}
