//! Questions about the client's own catalog in cluster mode: `SHOW TABLES`,
//! `SHOW COLUMNS`, `SHOW <option>`, `DESCRIBE t` and the prompt's `\d`, answered from
//! the information schema and the tables' schemas.
//!
//! A cluster session's tables are registered on the client, and the scheduler only
//! receives plans. Ballista cannot ship a plan that scans the information schema: its
//! tables are built in memory from the client's catalog. So `DESCRIBE` and a statement
//! that reads nothing but the information schema are planned and run here, on a local
//! context over the same catalog and the same settings. Every other statement goes to
//! the cluster.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;

/// A local context over `remote`'s catalog, settings and runtime, with the information
/// schema on.
pub(super) fn catalog_context(remote: &SessionContext) -> SessionContext {
    let state = remote.state();
    // Not a default catalog of its own: building the state would register it in the
    // shared list, replacing the session's catalog of the same name.
    let config = state
        .config()
        .clone()
        .with_information_schema(true)
        .with_create_default_catalog_and_schema(false);
    let local = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(Arc::clone(state.runtime_env()))
        .with_catalog_list(Arc::clone(state.catalog_list()))
        .build();
    let ctx = SessionContext::new_with_state(local);
    for udaf in crate::oxide_aggregate_udfs() {
        ctx.register_udaf(udaf.as_ref().clone());
    }
    ctx
}

/// Whether `plan` is answered by the catalog alone: `DESCRIBE t`, or a query that reads
/// tables, all of them in the information schema (subqueries included).
pub(super) fn answered_by_the_catalog(plan: &LogicalPlan) -> bool {
    if matches!(plan, LogicalPlan::DescribeTable(_)) {
        return true;
    }
    let (mut catalog_scans, mut other_scans) = (0, 0);
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            if scan.table_name.schema() == Some("information_schema") {
                catalog_scans += 1;
            } else {
                other_scans += 1;
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    catalog_scans > 0 && other_scans == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn show_and_describe_are_answered_by_the_catalog_and_a_query_of_a_table_is_not() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t (a INT) AS VALUES (1)")
            .await
            .unwrap();
        let local = catalog_context(&ctx);
        let plan = |sql: &'static str| {
            let local = local.clone();
            async move { local.state().create_logical_plan(sql).await.unwrap() }
        };
        assert!(answered_by_the_catalog(&plan("SHOW TABLES").await));
        assert!(answered_by_the_catalog(&plan("DESCRIBE t").await));
        assert!(answered_by_the_catalog(&plan("SHOW COLUMNS FROM t").await));
        assert!(answered_by_the_catalog(
            &plan("SELECT table_name FROM information_schema.tables").await
        ));
        assert!(!answered_by_the_catalog(
            &plan("SELECT * FROM t WHERE a IN (SELECT 1 FROM information_schema.tables)").await
        ));
        assert!(!answered_by_the_catalog(&plan("SELECT 1").await));
        assert!(!answered_by_the_catalog(&plan("SELECT * FROM t").await));
    }

    #[tokio::test]
    async fn the_local_context_sees_the_remote_sessions_tables_and_settings() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE t (a INT) AS VALUES (1)")
            .await
            .unwrap();
        ctx.sql("SET datafusion.execution.batch_size = 1234")
            .await
            .unwrap();
        let local = catalog_context(&ctx);
        let rows = local
            .sql("SELECT value FROM information_schema.df_settings WHERE name = 'datafusion.execution.batch_size'")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&rows)
            .unwrap()
            .to_string();
        assert!(text.contains("1234"), "{text}");
        let tables = local
            .sql("SHOW TABLES")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&tables)
            .unwrap()
            .to_string();
        assert!(text.contains("| t "), "{text}");
    }
}
