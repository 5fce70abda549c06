//! The same SQL with `oxidelake.placement.target` = cpu and = cuda on this GPU-less
//! machine: the cuda plans contain GPU operators (running their CPU paths) and every
//! result is identical.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::BackendKind;
use oxidelake_planner::{FixedProbe, OperatorFamily, PlacementCoverage};
use oxidelake_runtime::{OxideSession, PlacementTarget};

use super::data::{sorted_rows, write_lake};

/// (query, whether its cuda plan must contain a GPU operator)
const QUERIES: &[(&str, bool)] = &[
    ("SELECT k, a FROM t WHERE a < 500", true),
    ("SELECT k, a, b FROM t WHERE a >= 100 AND b < 20.5", true),
    ("SELECT a FROM t WHERE b = 2.5", true),
    (
        "SELECT k FROM t WHERE a > 10 AND a <= 20 AND b >= 0.0",
        true,
    ),
    ("SELECT * FROM t WHERE k = 3", true),
    ("SELECT k, s FROM t WHERE 250 > a", true),
    ("SELECT k FROM e WHERE a < 5", true),
    ("SELECT k, a FROM n WHERE a > 0", true),
    ("SELECT k FROM t WHERE s = 's1'", true),
    ("SELECT k FROM t WHERE s LIKE 's1%' OR s LIKE '%7'", true),
    (
        "SELECT k, s FROM t WHERE s IN ('s1', 's3') AND a >= 10",
        true,
    ),
    ("SELECT k FROM t WHERE s > 's4' AND s NOT LIKE '%2%'", true),
    ("SELECT k FROM t WHERE a < 5 OR a > 990", true),
    (
        "SELECT k, a FROM t WHERE a IN (1, 2, 3, 500) OR b IS NULL",
        true,
    ),
    ("SELECT k FROM t WHERE NOT (a > 10) AND k != 3", true),
    (
        "SELECT k, b FROM t WHERE a NOT IN (4, 5) AND b >= 1.5",
        true,
    ),
    // A self-join whose probe side arrives hash-partitioned by an aggregate, with the
    // same column names on both sides, under an aggregate that needs its own
    // repartition (the partitioning defect of GpuHashJoinExec).
    (
        "SELECT x.k, COUNT(*) AS n, SUM(y.s) AS s FROM t x \
         JOIN (SELECT a AS k, SUM(b) AS s FROM t GROUP BY a) y ON x.k = y.k GROUP BY x.k",
        true,
    ),
    ("SELECT t.a, d.name FROM t JOIN d ON t.k = d.k", true),
    (
        "SELECT t.k, d.w FROM t JOIN d ON t.k = d.k WHERE t.a < 300",
        true,
    ),
    ("SELECT e.a, d.name FROM e JOIN d ON e.k = d.k", true),
    ("SELECT n.b, d.k FROM n JOIN d ON n.k = d.k", true),
    ("SELECT x.name, y.name FROM d x JOIN d y ON x.k = y.k", true),
    ("SELECT t.a, d.name FROM t LEFT JOIN d ON t.k = d.k", true),
    ("SELECT t.a, d.name FROM t FULL JOIN d ON t.k = d.k", false),
    (
        "SELECT k, a FROM t WHERE EXISTS (SELECT 1 FROM d WHERE d.k = t.k)",
        true,
    ),
    (
        "SELECT k, a FROM t WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.k = t.k)",
        true,
    ),
    // Left semi and anti joins on the small d: run swapped they would build on the larger
    // t, so the first stays on the CPU (see the test below), under an ORDER BY on a later
    // column.
    (
        "SELECT k, name FROM d WHERE EXISTS (SELECT 1 FROM t WHERE t.k = d.k) ORDER BY name, k",
        false,
    ),
    // With t's filter the estimates make t the smaller side: run swapped.
    (
        "SELECT k, name FROM d WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.k = d.k AND t.a < 50) \
         ORDER BY name, k",
        true,
    ),
    (
        "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k",
        true,
    ),
    (
        "SELECT k, MIN(a), MAX(a), SUM(b), COUNT(b) FROM t GROUP BY k",
        true,
    ),
    ("SELECT k, COUNT(b), SUM(a) FROM n GROUP BY k", true),
    ("SELECT k, SUM(a), MAX(b) FROM e GROUP BY k", true),
    ("SELECT k, SUM(b) FROM t WHERE a < 100 GROUP BY k", true),
    (
        "SELECT d.k, SUM(t.a), COUNT(t.b) FROM t JOIN d ON t.k = d.k GROUP BY d.k",
        true,
    ),
    // The partial half on the device: string, composite and no keys, COUNT(*), AVG
    // (over an integer: the cast DataFusion inserts runs before the transfer).
    ("SELECT s, COUNT(a) FROM t GROUP BY s", true),
    ("SELECT k, COUNT(*) FROM t GROUP BY k", true),
    (
        "SELECT s, k, SUM(a), AVG(b), COUNT(*), MIN(b) FROM t GROUP BY s, k",
        true,
    ),
    ("SELECT s, AVG(a), MAX(a) FROM n GROUP BY s", true),
    (
        "SELECT SUM(a), AVG(b), MAX(k), COUNT(*) FROM t WHERE a < 700",
        true,
    ),
    ("SELECT SUM(a), COUNT(b) FROM e", true),
    (
        "SELECT s, SUM(a) FROM t GROUP BY s HAVING SUM(a) > 100",
        true,
    ),
    (
        "SELECT k, array_distance(v, [1.0, 2.0, 3.0]) AS dist FROM t",
        true,
    ),
    (
        "SELECT k, a, array_distance(v, [0.0, 0.0, 0.5]) AS dist FROM t WHERE a < 100",
        true,
    ),
    (
        "SELECT array_distance(v, [1.0, 1.0, 1.0]) AS dist FROM e",
        true,
    ),
    (
        "SELECT k, array_distance(v, [1.0, 2.0, 3.0]) AS dist FROM n",
        true,
    ),
    ("SELECT COUNT(*) FROM t", false),
    (
        "SELECT k, a FROM t WHERE a < 500 ORDER BY a, k LIMIT 20",
        true,
    ),
];

fn gpu_nodes(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let mut n = 0;
    plan.apply(|node| {
        if node.name().starts_with("Gpu") {
            n += 1;
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    n
}

async fn session(target: PlacementTarget, tables: &[(&str, String)]) -> OxideSession {
    let session = OxideSession::local_with(target, Arc::new(FixedProbe(BackendKind::CpuSimd)));
    for (name, path) in tables {
        session.register_parquet(name, path).await.unwrap();
    }
    session
}

#[tokio::test]
async fn every_query_returns_the_same_rows_placed_for_cpu_and_for_cuda() {
    let dir = tempfile::tempdir().unwrap();
    let tables = write_lake(dir.path());
    let cpu = session(PlacementTarget::Cpu, &tables).await;
    let cuda = session(PlacementTarget::Cuda, &tables).await;
    let mut placed = 0;
    for (sql, expect_gpu) in QUERIES {
        let cpu_plan = cpu.physical_plan(sql).await.unwrap();
        let cuda_plan = cuda.physical_plan(sql).await.unwrap();
        assert_eq!(gpu_nodes(&cpu_plan), 0, "{sql}");
        let gpu = gpu_nodes(&cuda_plan);
        assert_eq!(
            gpu > 0,
            *expect_gpu,
            "{sql}\n{}",
            cuda.explain(sql).await.unwrap()
        );
        placed += usize::from(gpu > 0);
        let expected = sorted_rows(&cpu.sql(sql).await.unwrap());
        let got = sorted_rows(&cuda.sql(sql).await.unwrap());
        assert!(
            expected == got,
            "{sql}: {} rows on cpu, {} on cuda; first difference: {:?}",
            expected.len(),
            got.len(),
            expected.iter().zip(&got).find(|(a, b)| a != b)
        );
    }
    println!(
        "differential: {} queries, {placed} placed on GPU operators, all equal to the CPU plans",
        QUERIES.len()
    );
}

#[tokio::test]
async fn set_changes_the_placement_target_and_explain_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let tables = write_lake(dir.path());
    let session = session(PlacementTarget::Cpu, &tables).await;
    let sql = "SELECT k, SUM(a) FROM t WHERE a < 100 GROUP BY k";
    let before = session.explain(sql).await.unwrap();
    assert!(
        before.contains("[cpu: placement target is cpu]"),
        "{before}"
    );
    session
        .sql("SET oxidelake.placement.target = 'cuda'")
        .await
        .unwrap();
    assert_eq!(session.placement_target(), PlacementTarget::Cuda);
    let batches = session.sql(&format!("EXPLAIN {sql}")).await.unwrap();
    let text = sorted_rows(&batches).join("\n");
    assert!(text.contains("GpuPartialAggregateExec[cuda]"), "{text}");
    assert!(text.contains("GpuFilterExec[cuda]"), "{text}");
    let err = session
        .sql("SET oxidelake.placement.target = 'tpu'")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("auto, cpu, cuda, metal"), "{err}");
}

#[tokio::test]
async fn left_semi_and_anti_joins_run_swapped_only_where_that_does_not_build_on_the_larger_side() {
    let dir = tempfile::tempdir().unwrap();
    let tables = write_lake(dir.path());
    let cpu = session(PlacementTarget::Cpu, &tables).await;
    let cuda = session(PlacementTarget::Cuda, &tables).await;
    // Without statistics the plan has no row estimates: nothing says the swap builds on
    // the larger side.
    let blind = OxideSession::local_with(
        PlacementTarget::Cuda,
        Arc::new(FixedProbe(BackendKind::CpuSimd)),
    );
    blind
        .sql("SET datafusion.execution.collect_statistics = false")
        .await
        .unwrap();
    for (name, path) in &tables {
        blind.register_parquet(name, path).await.unwrap();
    }
    // d is the small table: DataFusion keeps it as the build side of a left semi/anti join.
    for (sql, kind) in [
        (
            "SELECT k, name FROM d WHERE EXISTS (SELECT 1 FROM t WHERE t.k = d.k) ORDER BY name, k",
            "Semi",
        ),
        (
            "SELECT k, name FROM d WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.k = d.k) \
             ORDER BY name, k",
            "Anti",
        ),
    ] {
        let stock = cpu.explain(sql).await.unwrap();
        assert!(stock.contains(&format!("join_type=Left{kind}")), "{stock}");
        let estimated = cuda.physical_plan(sql).await.unwrap();
        let coverage = PlacementCoverage::of(&estimated, BackendKind::Cuda);
        assert!(
            coverage
                .reasons
                .keys()
                .any(|(family, reason)| *family == OperatorFamily::Join
                    && reason.contains(&format!(
                        "Left{kind} join: swapped, it would build on its larger input"
                    ))),
            "with estimates, t (larger) is not made the build side: {:?}",
            coverage.reasons
        );
        assert_eq!(coverage.get(OperatorFamily::Join), (0, 1));
        let placed = blind.explain(sql).await.unwrap();
        assert!(
            placed.lines().any(|l| l.contains("GpuHashJoinExec[cuda]")
                && l.contains(&format!("join_type=Right{kind}"))),
            "{placed}"
        );
        let want = super::data::cells(&cpu.sql(sql).await.unwrap());
        assert!(!want.is_empty(), "{sql}");
        for placed_for in [&cuda, &blind] {
            let got = super::data::cells(&placed_for.sql(sql).await.unwrap());
            assert_eq!(want, got, "{sql}: rows or their order differ");
        }
    }
}
