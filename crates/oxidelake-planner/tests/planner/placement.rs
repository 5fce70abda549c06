//! Rewrite decisions of `HardwarePlacementRule` with a detector that reports a GPU.

use oxidelake_core::BackendKind;
use oxidelake_planner::PlacementTarget;

use super::fixtures::{explain, physical_plan, session};

async fn gpu_explain(sql: &str) -> String {
    explain(PlacementTarget::Auto, BackendKind::Cuda, sql).await
}

/// The result rows of `sql` placed for `target` (run on the CPU backend), as the lines of
/// Arrow's pretty table below its header, in result order.
async fn pretty_rows(target: PlacementTarget, sql: &str) -> Vec<String> {
    rows_of(&session(target, BackendKind::CpuSimd), sql).await
}

/// The result rows of `sql` on `ctx`, as [`pretty_rows`] gives them.
async fn rows_of(ctx: &datafusion::prelude::SessionContext, sql: &str) -> Vec<String> {
    let plan = physical_plan(ctx, sql).await;
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap();
    arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string()
        .lines()
        .skip(3)
        .map(str::to_string)
        .collect()
}

/// `sql` returns the same rows, in the same order, placed for cpu and for cuda, and at
/// least `rows` of them.
async fn assert_same_rows_placed_for_cpu_and_cuda(sql: &str, rows: usize) {
    let (cpu, cuda) = (
        pretty_rows(PlacementTarget::Cpu, sql).await,
        pretty_rows(PlacementTarget::Cuda, sql).await,
    );
    assert_eq!(cpu, cuda, "{sql}");
    // The last line is the table's bottom border.
    assert!(cpu.len() > rows, "{sql} returned fewer than {rows} rows");
}

#[tokio::test]
async fn a_numeric_conjunctive_filter_becomes_a_gpu_filter() {
    let text = gpu_explain("SELECT k, a FROM t WHERE a < 500 AND b >= 1.0").await;
    assert!(text.contains("GpuFilterExec[cuda]"), "{text}");
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn string_equality_and_like_filters_become_gpu_filters() {
    let text = gpu_explain("SELECT k FROM t WHERE s = 'x' OR s LIKE '%y%'").await;
    assert!(text.contains("GpuFilterExec[cuda]"), "{text}");
    assert!(text.contains(" = 'x'"), "{text}");
}

#[tokio::test]
async fn or_in_and_not_predicates_become_one_gpu_filter() {
    let text = gpu_explain(
        "SELECT k FROM t WHERE (a < 1 OR a > 30) AND k IN (1, 2, 3) AND NOT (b IS NULL)",
    )
    .await;
    assert!(text.contains("GpuFilterExec[cuda]"), "{text}");
    assert!(!text.contains("FilterExec: "), "{text}");
}

#[tokio::test]
async fn a_like_pattern_with_an_underscore_stays_on_the_cpu_and_says_why() {
    let text = gpu_explain("SELECT k FROM t WHERE s LIKE 'x_'").await;
    assert!(
        text.contains("[cpu: LIKE with _ or escapes runs on the CPU"),
        "{text}"
    );
}

#[tokio::test]
async fn an_inner_join_on_one_int64_key_becomes_a_gpu_hash_join() {
    let text = gpu_explain("SELECT t.a, d.name FROM t JOIN d ON t.k = d.k").await;
    assert!(text.contains("GpuHashJoinExec[cuda]"), "{text}");
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn joins_on_two_keys_on_strings_and_with_a_join_filter_become_gpu_hash_joins_with_the_stock_rows()
 {
    for (sql, shown) in [
        (
            "SELECT t.b, d.name FROM t JOIN d ON t.k = d.k AND t.a = d.a ORDER BY t.b",
            "on=[(k@0, k@0), (a@1, a@1)]",
        ),
        (
            "SELECT t.k, t2.a FROM t JOIN t t2 ON t.s = t2.s ORDER BY t.k, t2.a",
            "on=[(s@",
        ),
        (
            "SELECT t.k, t.a, d.a FROM t JOIN d ON t.k = d.k AND t.a > d.a ORDER BY t.k",
            "filter=a@0 > a@1",
        ),
        (
            "SELECT t.k, t.a FROM t WHERE EXISTS \
             (SELECT 1 FROM d WHERE d.k = t.k AND d.a < t.a) ORDER BY t.k, t.a",
            "join_type=RightSemi",
        ),
        (
            "SELECT t.k, t.a FROM t WHERE NOT EXISTS \
             (SELECT 1 FROM d WHERE d.k = t.k AND d.a < t.a) ORDER BY t.k, t.a",
            "join_type=RightAnti",
        ),
    ] {
        let text = gpu_explain(sql).await;
        let join = text
            .lines()
            .find(|l| l.contains("GpuHashJoinExec[cuda]"))
            .unwrap_or_else(|| panic!("{sql}: no GPU join\n{text}"));
        assert!(join.contains(shown), "{sql}: {join} lacks {shown}");
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("HashJoinExec")),
            "{sql}: a stock join is left\n{text}"
        );
        assert_same_rows_placed_for_cpu_and_cuda(sql, 1).await;
    }
}

#[tokio::test]
async fn semi_and_anti_joins_under_an_order_by_on_a_later_column_keep_the_stock_order() {
    // A sort pushed through a semi join onto the wrong probe column made TPC-H Q20 fail
    // SanityCheckPlan; the join no longer offers its probe order for sort pushdown.
    for (sql, device_type) in [
        (
            "SELECT t.k, t.a FROM t WHERE EXISTS (SELECT 1 FROM d WHERE d.k = t.k) ORDER BY t.a, t.k",
            "Semi",
        ),
        (
            "SELECT t.k, t.a FROM t WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.k = t.k) ORDER BY t.a, t.k",
            "Anti",
        ),
    ] {
        let text = gpu_explain(sql).await;
        assert!(
            text.contains(&format!(
                "GpuHashJoinExec[cuda]: mode=CollectLeft, join_type=Right{device_type}"
            )),
            "{text}"
        );
        assert_same_rows_placed_for_cpu_and_cuda(sql, 1).await;
    }
}

#[tokio::test]
async fn left_outer_joins_onto_a_smaller_right_input_become_right_gpu_joins_with_the_stock_rows() {
    for sql in [
        "SELECT t.b, d.name, t.k FROM t LEFT JOIN d ON t.k = d.k ORDER BY t.b, d.name",
        "SELECT * FROM t LEFT JOIN d ON t.k = d.k AND t.a = d.a ORDER BY t.k, t.a",
    ] {
        let text = gpu_explain(sql).await;
        assert!(
            text.contains("GpuHashJoinExec[cuda]: mode=CollectLeft, join_type=Right"),
            "{sql}\n{text}"
        );
        assert_same_rows_placed_for_cpu_and_cuda(sql, 2).await;
        let schema_for = async |target| {
            physical_plan(&session(target, BackendKind::CpuSimd), sql)
                .await
                .schema()
        };
        assert_eq!(
            schema_for(PlacementTarget::Cpu).await,
            schema_for(PlacementTarget::Cuda).await,
            "{sql}: names, types or nullability differ"
        );
    }
}

/// d is the small table: DataFusion keeps it as the left (build) side of `d LEFT JOIN t`
/// (and turns `t RIGHT JOIN d` into that). The GPU join would run it as a right join with
/// t as the build side, so it stays stock.
#[tokio::test]
async fn a_left_join_whose_right_input_is_estimated_larger_stays_on_the_cpu_and_says_why() {
    for sql in [
        "SELECT d.name, t.a FROM d LEFT JOIN t ON t.k = d.k AND t.a > 10 ORDER BY d.name, t.a",
        "SELECT t.b, d.name FROM t RIGHT JOIN d ON t.k = d.k ORDER BY d.name, t.b",
    ] {
        let text = gpu_explain(sql).await;
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("HashJoinExec")
                    && l.contains("join_type=Left")
                    && l.contains("[cpu: Left join: swapped, it would build on its larger input")),
            "{sql}\n{text}"
        );
        assert_same_rows_placed_for_cpu_and_cuda(sql, 1).await;
    }
}

#[tokio::test]
async fn a_full_outer_join_stays_on_the_cpu_and_says_why() {
    let text = gpu_explain("SELECT t.b, d.name FROM t FULL JOIN d ON t.k = d.k").await;
    assert!(text.contains("[cpu: Full join]"), "{text}");
}

#[tokio::test]
async fn a_grouped_numeric_aggregate_is_reduced_on_the_device_and_merged_by_the_stock_final() {
    let text = gpu_explain("SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k").await;
    assert!(
        text.contains("GpuPartialAggregateExec[cuda]: mode=Partial"),
        "{text}"
    );
    assert!(!text.contains("AggregateExec: mode=Partial"), "{text}");
    assert!(text.contains("AggregateExec: mode=Final"), "{text}");
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn grouping_by_a_string_is_reduced_on_the_device() {
    let text = gpu_explain("SELECT s, SUM(a) FROM t GROUP BY s").await;
    assert!(
        text.contains("GpuPartialAggregateExec[cuda]: mode=Partial, gby=[s]"),
        "{text}"
    );
    assert!(!text.contains("[cpu:"), "{text}");
}

#[tokio::test]
async fn count_star_avg_and_aggregates_without_group_by_are_reduced_on_the_device() {
    for sql in [
        "SELECT k, COUNT(*) FROM t GROUP BY k",
        "SELECT k, AVG(a) FROM t GROUP BY k",
        "SELECT SUM(a), AVG(b), COUNT(*) FROM t",
        "SELECT s, k, MIN(b) FROM t GROUP BY s, k",
    ] {
        let text = gpu_explain(sql).await;
        assert!(
            text.contains("GpuPartialAggregateExec[cuda]"),
            "{sql}\n{text}"
        );
    }
}

#[tokio::test]
async fn an_aggregate_function_without_a_device_path_stays_on_the_cpu_and_says_why() {
    let text = gpu_explain("SELECT k, MEDIAN(a) FROM t GROUP BY k").await;
    assert!(text.contains("[cpu: median()]"), "{text}");
}

/// The first line below `node` in `text` that is not a repartition.
fn below<'a>(text: &'a str, node: &str) -> &'a str {
    let at = text
        .lines()
        .position(|l| l.contains(node))
        .unwrap_or_else(|| panic!("no {node}:\n{text}"));
    text.lines()
        .skip(at + 1)
        .find(|l| !l.contains("RepartitionExec"))
        .unwrap_or_default()
}

fn below_device_partial(text: &str) -> &str {
    below(text, "GpuPartialAggregateExec[cuda]")
}

#[tokio::test]
async fn an_arithmetic_argument_is_computed_by_a_gpu_projection_below_the_device_partial() {
    let text = gpu_explain("SELECT k, SUM(a * 2), AVG(b + 1.5) FROM t GROUP BY k").await;
    let below = below_device_partial(&text);
    assert!(
        below.contains("GpuProjectionExec[cuda]") && below.contains("__oxide_agg_arg_0"),
        "{text}"
    );
}

#[tokio::test]
async fn the_projection_below_the_device_partial_keeps_only_the_keys_and_the_arguments() {
    // `a` feeds only the computed argument: it is not passed through beside it.
    let text = gpu_explain("SELECT k, SUM(a * 2), MAX(b) FROM t GROUP BY k").await;
    let below = below_device_partial(&text);
    assert!(
        below.contains("expr=[k@0 as k, b@2 as b, a@1 * 2 as __oxide_agg_arg_0]"),
        "{text}"
    );
    let rows = pretty_rows(
        PlacementTarget::Cuda,
        "SELECT k, SUM(a * 2), MAX(b) FROM t GROUP BY k ORDER BY k",
    )
    .await;
    let stock = pretty_rows(
        PlacementTarget::Cpu,
        "SELECT k, SUM(a * 2), MAX(b) FROM t GROUP BY k ORDER BY k",
    )
    .await;
    assert_eq!(rows, stock);
}

#[tokio::test]
async fn an_argument_the_device_cannot_compute_is_computed_by_a_stock_projection() {
    let text =
        gpu_explain("SELECT k, SUM(CASE WHEN a > 0 THEN a ELSE 0 END) FROM t GROUP BY k").await;
    let below = below_device_partial(&text);
    assert!(
        below.trim_start().starts_with("ProjectionExec") && below.contains("__oxide_agg_arg_0"),
        "{text}"
    );
}

#[tokio::test]
async fn a_projection_computing_arithmetic_is_placed_and_one_with_division_says_why() {
    let text = gpu_explain("SELECT k, a * 3 - 1 AS x FROM t").await;
    assert!(
        text.contains("GpuProjectionExec[cuda]: expr=[k@0 as k, a@1 * 3 - 1 as x]"),
        "{text}"
    );
    let text = gpu_explain("SELECT k, a / 3 AS x FROM t").await;
    assert!(text.contains("[cpu: division]"), "{text}");
    // Literals ride along; a projection of columns and literals is not a candidate.
    let text = gpu_explain("SELECT k, 'x' AS tag, a * 2 AS d FROM t").await;
    assert!(text.contains("GpuProjectionExec[cuda]"), "{text}");
    let text = gpu_explain("SELECT k, 'x' AS tag, 7 AS seven FROM t").await;
    assert!(
        !text.contains("GpuProjectionExec") && !text.contains("[cpu:"),
        "{text}"
    );
}

#[tokio::test]
async fn a_comparison_of_an_arithmetic_expression_is_filtered_on_a_computed_column() {
    let text = gpu_explain("SELECT k FROM t WHERE a * 2 + k > 10 AND b - 1.5 < b * 0.5").await;
    assert!(text.contains("__oxide_filter_arg_0@"), "{text}");
    assert!(
        below(&text, "GpuFilterExec[cuda]").contains("GpuProjectionExec[cuda]"),
        "{text}"
    );
    assert!(!text.contains("[cpu:"), "{text}");
}

#[tokio::test]
async fn a_vector_distance_projection_becomes_a_gpu_vector_distance() {
    let text = gpu_explain("SELECT k, array_distance(v, [1.0, 0.0]) AS dist FROM t").await;
    assert!(text.contains("GpuVectorDistanceExec[cuda]"), "{text}");
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn an_l2_distance_projection_placed_for_cuda_becomes_a_gpu_vector_distance() {
    let text = explain(
        PlacementTarget::Cuda,
        BackendKind::Cuda,
        "SELECT k, l2_distance(v, [1.0, 2.0]) AS d FROM t",
    )
    .await;
    assert!(text.contains("GpuVectorDistanceExec[cuda]"), "{text}");
    assert!(text.contains("d=l2(v@1, query[2])"), "{text}");
    assert!(!text.contains("l2_distance("), "{text}");
}

#[tokio::test]
async fn with_target_cpu_nothing_is_rewritten_and_explain_says_so() {
    let text = explain(
        PlacementTarget::Cpu,
        BackendKind::Cuda,
        "SELECT k, SUM(a) FROM t WHERE a < 100 GROUP BY k",
    )
    .await;
    assert!(!text.contains("Gpu"), "{text}");
    assert!(text.contains("[cpu: placement target is cpu]"), "{text}");
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn auto_on_a_machine_without_a_gpu_rewrites_nothing() {
    let text = explain(
        PlacementTarget::Auto,
        BackendKind::CpuSimd,
        "SELECT k, a FROM t WHERE a < 500",
    )
    .await;
    assert!(!text.contains("Gpu"), "{text}");
    assert!(text.contains("[cpu: no GPU detected]"), "{text}");
}

#[tokio::test]
async fn rewritten_plans_return_the_same_rows_as_cpu_plans() {
    let queries = [
        "SELECT k, a FROM t WHERE a < 500 AND b >= 1.0",
        "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k",
        "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k",
        "SELECT k, array_distance(v, [1.0, 0.0]) AS dist FROM t",
        "SELECT k, l2_distance(v, [1.0, 2.0]) AS d FROM t",
        "SELECT k, a * 3 - k AS x, -b * 0.5 AS y, CAST(a AS DOUBLE) + b AS z FROM t",
        "SELECT k, SUM(a * 2 - k), AVG(b * b + 1.5) FROM t GROUP BY k",
        "SELECT k, a FROM t WHERE a * 2 + k > 10 AND b - 1.5 < b * 0.5",
    ];
    for sql in queries {
        let mut results = Vec::new();
        for target in [PlacementTarget::Cpu, PlacementTarget::Cuda] {
            let mut rows = pretty_rows(target, sql).await;
            rows.sort();
            results.push(rows);
        }
        assert_eq!(results[0], results[1], "{sql}");
    }
}

#[tokio::test]
async fn a_query_vector_f32_cannot_hold_exactly_stays_on_the_cpu() {
    let text = gpu_explain("SELECT k, array_distance(v, [1.1, 2.2]) AS dist FROM t").await;
    assert!(!text.contains("GpuVectorDistanceExec"), "{text}");
    assert!(
        text.contains("[cpu: query vector not exact in f32]"),
        "{text}"
    );
}

/// A session for `target` whose joins DataFusion plans in Partitioned mode (no build side
/// is small enough to collect), as it does for large tables.
async fn partitioning_session(target: PlacementTarget) -> datafusion::prelude::SessionContext {
    let ctx = session(target, BackendKind::CpuSimd);
    for option in [
        "hash_join_single_partition_threshold",
        "hash_join_single_partition_threshold_rows",
    ] {
        ctx.sql(&format!("SET datafusion.optimizer.{option} = 0"))
            .await
            .unwrap();
    }
    ctx
}

#[tokio::test]
async fn joins_datafusion_partitions_stay_partitioned_on_the_gpu_with_the_stock_rows() {
    for (sql, shown) in [
        (
            "SELECT t.k, t.a, d.name FROM t JOIN d ON t.k = d.k ORDER BY t.k, t.a",
            "join_type=Inner",
        ),
        (
            "SELECT t.b, d.name FROM t JOIN d ON t.k = d.k AND t.a = d.a AND t.a < d.k * 20 \
             ORDER BY t.b",
            "join_type=Inner",
        ),
        (
            "SELECT t.b, d.name, t.k FROM t LEFT JOIN d ON t.k = d.k ORDER BY t.b, d.name",
            "join_type=Right",
        ),
        (
            "SELECT t.k, t.a FROM t WHERE EXISTS (SELECT 1 FROM d WHERE d.k = t.k) \
             ORDER BY t.k, t.a",
            "join_type=RightSemi",
        ),
        (
            "SELECT t.k, t.a FROM t WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.k = t.k) \
             ORDER BY t.k, t.a",
            "join_type=RightAnti",
        ),
    ] {
        let stock = partitioning_session(PlacementTarget::Cpu).await;
        let placed = partitioning_session(PlacementTarget::Cuda).await;
        let stock_plan = physical_plan(&stock, sql).await;
        let stock_text = datafusion::physical_plan::displayable(stock_plan.as_ref())
            .indent(true)
            .to_string();
        assert!(
            stock_text.contains("HashJoinExec: mode=Partitioned"),
            "{sql}: DataFusion did not partition the join\n{stock_text}"
        );
        let placed_plan = physical_plan(&placed, sql).await;
        let text = datafusion::physical_plan::displayable(placed_plan.as_ref())
            .indent(true)
            .to_string();
        let join = text
            .lines()
            .find(|l| l.contains("GpuHashJoinExec"))
            .unwrap_or_else(|| panic!("{sql}: no GPU join\n{text}"));
        assert!(
            join.contains("mode=Partitioned") && join.contains(shown),
            "{sql}: {join}"
        );
        // Both inputs are hash-partitioned below it, as below the stock join.
        assert_eq!(
            text.matches("RepartitionExec: partitioning=Hash").count(),
            stock_text
                .matches("RepartitionExec: partitioning=Hash")
                .count(),
            "{sql}\n{stock_text}\n{text}"
        );
        let (a, b) = (rows_of(&stock, sql).await, rows_of(&placed, sql).await);
        assert_eq!(a, b, "{sql}");
        // The last line is the table's bottom border.
        assert!(a.len() > 1, "{sql} returned no rows");
    }
}

/// The names of `plan`'s nodes that are OxideLake operators, with their placement label.
fn our_operators(
    ctx_plan: &std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> Vec<String> {
    datafusion::physical_plan::displayable(ctx_plan.as_ref())
        .indent(false)
        .to_string()
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("Gpu"))
        .map(|l| l.split(':').next().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_cpu_placement_runs_the_operator_kinds_it_names_on_their_cpu_paths_with_the_stock_rows() {
    let sql = "SELECT k, s * 2 + n AS x FROM (SELECT t.k, SUM(t.a) AS s, COUNT(*) AS n \
               FROM t JOIN d ON t.k = d.k WHERE t.a < 500 GROUP BY t.k) ORDER BY k";
    // A machine with a GPU: the CPU placement still keeps everything on the CPU.
    let ctx = session(PlacementTarget::Cpu, BackendKind::Cuda);
    let stock = rows_of(&ctx, sql).await;
    assert!(stock.len() >= 3, "{stock:?}");
    for (kinds, expected) in [
        ("none", vec![]),
        ("projection", vec!["GpuProjectionExec[cpu]"]),
        (
            "filter,join",
            vec!["GpuHashJoinExec[cpu]", "GpuFilterExec[cpu]"],
        ),
        (
            "all",
            vec![
                "GpuProjectionExec[cpu]",
                "GpuPartialAggregateExec[cpu]",
                "GpuHashJoinExec[cpu]",
                "GpuFilterExec[cpu]",
            ],
        ),
    ] {
        ctx.sql(&format!(
            "SET oxidelake.placement.cpu_operators = '{kinds}'"
        ))
        .await
        .unwrap();
        let plan = physical_plan(&ctx, sql).await;
        let mut ours = our_operators(&plan);
        ours.dedup();
        assert_eq!(ours, expected, "{kinds}");
        assert_eq!(rows_of(&ctx, sql).await, stock, "{kinds}");
    }
    assert!(
        ctx.sql("SET oxidelake.placement.cpu_operators = 'sort'")
            .await
            .is_err()
    );
}
