//! The same SQL with `oxidelake.placement.target` = cpu and = cuda on this GPU-less
//! machine: the cuda plans contain GPU operators (running their CPU paths) and every
//! result is identical.

mod sum_overflow;

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
    let err = err.to_string();
    assert!(
        err.contains("auto, cpu, cuda") && !err.contains("metal"),
        "{err}"
    );
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

/// Sessions placed for cpu and for cuda (the GPU operators on this machine's CPU paths,
/// or on the emulated device under `OXIDE_BACKEND=cuda`), each with `batches` as the
/// in-memory table `name` (no file statistics: every answer is computed) and one target
/// partition, so that each aggregate sees the rows in the order given.
async fn memory_sessions(
    name: &str,
    batches: Vec<Vec<arrow::record_batch::RecordBatch>>,
) -> Vec<(PlacementTarget, OxideSession)> {
    let mut out = Vec::new();
    for target in [PlacementTarget::Cpu, PlacementTarget::Cuda] {
        let session = session(target, &[]).await;
        session
            .sql("SET datafusion.execution.target_partitions = 1")
            .await
            .unwrap();
        let schema = batches[0][0].schema();
        let table = datafusion::datasource::MemTable::try_new(schema, batches.clone()).unwrap();
        session
            .context()
            .register_table(name, Arc::new(table))
            .unwrap();
        out.push((target, session));
    }
    out
}

/// The single Int64 count a `SELECT count(..)` returns.
fn count_of(batches: &[arrow::record_batch::RecordBatch]) -> i64 {
    use arrow::array::AsArray;
    let counts: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(counts.len(), 1, "one count");
    counts[0]
}

#[tokio::test]
async fn a_filter_on_signed_zeros_counts_the_same_rows_on_every_placement() {
    use arrow::array::{Float64Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    // 1,000 rows: f is -0.0 and +0.0 in turn, g the other zero; h cycles through NaN,
    // +inf, -inf, 1.5, -0.0, 0.0, NULL and -1.5 (125 rows each). Four partitions.
    let h_cycle = [
        Some(f64::NAN),
        Some(f64::INFINITY),
        Some(f64::NEG_INFINITY),
        Some(1.5),
        Some(-0.0),
        Some(0.0),
        None,
        Some(-1.5),
    ];
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("f", DataType::Float64, false),
        Field::new("g", DataType::Float64, false),
        Field::new("h", DataType::Float64, true),
    ]));
    let zero = |i: i64| if i % 2 == 0 { -0.0 } else { 0.0 };
    let partitions: Vec<Vec<RecordBatch>> = (0..4i64)
        .map(|p| {
            let ids: Vec<i64> = (p * 250..(p + 1) * 250).collect();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(ids.clone())),
                    Arc::new(Float64Array::from_iter_values(ids.iter().map(|i| zero(*i)))),
                    Arc::new(Float64Array::from_iter_values(
                        ids.iter().map(|i| -zero(*i)),
                    )),
                    Arc::new(Float64Array::from_iter(
                        ids.iter().map(|i| h_cycle[(*i % 8) as usize]),
                    )),
                ],
            )
            .unwrap();
            vec![batch]
        })
        .collect();
    // DataFusion's comparison semantics: -0.0 = 0.0, NaN = NaN and above +inf.
    let queries: [(&str, i64); 12] = [
        ("SELECT count(k) FROM z WHERE f = 0", 1000),
        ("SELECT count(k) FROM z WHERE f IN (0.0, 1.5)", 1000),
        ("SELECT count(k) FROM z WHERE f >= 0.0 AND f <= 0.0", 1000),
        // Longer than DataFusion inlines as `=`s: evaluated as a set of bit patterns
        // unless the other zero is in the list (SignedZeroInListRule).
        (
            "SELECT count(k) FROM z WHERE f IN (0.0, 1.5, 2.5, 3.5)",
            1000,
        ),
        (
            "SELECT count(k) FROM z WHERE f NOT IN (-0.0, 1.5, 2.5, 3.5)",
            0,
        ),
        ("SELECT count(k) FROM z WHERE f < 0.0 OR f > -0.0", 0),
        ("SELECT count(k) FROM z WHERE f = g", 1000),
        ("SELECT count(k) FROM z WHERE h = 0.0", 250),
        ("SELECT count(k) FROM z WHERE h <> 0.0", 625),
        ("SELECT count(k) FROM z WHERE h > 1.5", 250),
        ("SELECT count(k) FROM z WHERE h = 'NaN'::double", 125),
        ("SELECT count(k) FROM z WHERE h < -1.0", 250),
    ];
    let sessions = memory_sessions("z", partitions).await;
    for (sql, want) in queries {
        for (target, session) in &sessions {
            if *target == PlacementTarget::Cuda {
                let plan = session.explain(sql).await.unwrap();
                assert!(plan.contains("GpuFilterExec[cuda]"), "{sql}\n{plan}");
            }
            let got = count_of(&session.sql(sql).await.unwrap());
            assert_eq!(got, want, "{sql} placed for {target:?}");
        }
    }
}

/// `(g, min bits, max bits)` per row of a `SELECT g, min(v), max(v) ... GROUP BY g`,
/// sorted by g; any NaN as `f64::NAN`'s bits (with its sign).
fn min_max_rows(
    batches: &[arrow::record_batch::RecordBatch],
) -> Vec<(i64, Option<u64>, Option<u64>)> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float64Type, Int64Type};
    let bits = |v: f64| match (v.is_nan(), v.is_sign_negative()) {
        (true, false) => f64::NAN.to_bits(),
        (true, true) => (-f64::NAN).to_bits(),
        (false, _) => v.to_bits(),
    };
    let mut rows = Vec::new();
    for b in batches {
        let g = b.column(0).as_primitive::<Int64Type>();
        let min = b.column(1).as_primitive::<Float64Type>();
        let max = b.column(2).as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            rows.push((
                g.value(i),
                min.is_valid(i).then(|| bits(min.value(i))),
                max.is_valid(i).then(|| bits(max.value(i))),
            ));
        }
    }
    rows.sort();
    rows
}

#[tokio::test]
async fn grouped_and_ungrouped_float_min_and_max_with_nan_agree_on_every_placement() {
    use arrow::array::{Float64Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    // In this order: a group of -infs then a NaN then -0.0 (DataFusion 55.2's grouped MIN
    // answers -0.0), groups of only -inf and only +inf (its grouped MAX and MIN answer
    // the largest finite values), signed zeros, and NULLs.
    let mut rows: Vec<(i64, Option<f64>)> = vec![(1, Some(nan)), (1, Some(2.0)), (1, Some(-3.0))];
    rows.extend(std::iter::repeat_n((2, Some(-inf)), 666));
    rows.extend([(2, Some(nan)), (2, Some(-0.0)), (2, Some(5.0))]);
    rows.extend([(3, Some(-inf)), (3, Some(-inf)), (4, Some(inf))]);
    rows.extend([(5, Some(-0.0)), (5, Some(0.0)), (6, None), (6, None)]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("g", DataType::Int64, false),
        Field::new("v", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.1))),
        ],
    )
    .unwrap();
    let bits = |v: f64| Some(v.to_bits());
    // IEEE total order, as DataFusion's ungrouped MIN/MAX and Arrow's kernels order
    // floats: NaN above +inf, -0.0 below +0.0, NULLs ignored.
    let want = vec![
        (1, bits(-3.0), bits(nan)),
        (2, bits(-inf), bits(nan)),
        (3, bits(-inf), bits(-inf)),
        (4, bits(inf), bits(inf)),
        (5, bits(-0.0), bits(0.0)),
        (6, None, None),
    ];
    let grouped = "SELECT g, min(v), max(v) FROM w GROUP BY g";
    let issue = "SELECT g, min(v), max(v) FROM (VALUES (1, 'NaN'::double), (1, 2.0), (1, -3.0)) \
                 t(g, v) GROUP BY g";
    let ungrouped = "SELECT count(*), min(v), max(v) FROM w";
    for (target, session) in &memory_sessions("w", vec![vec![batch]]).await {
        if *target == PlacementTarget::Cuda {
            let plan = session.explain(grouped).await.unwrap();
            assert!(plan.contains("GpuPartialAggregateExec[cuda]"), "{plan}");
        }
        let got = min_max_rows(&session.sql(grouped).await.unwrap());
        assert_eq!(got, want, "{grouped} placed for {target:?}");
        let got = min_max_rows(&session.sql(issue).await.unwrap());
        assert_eq!(
            got,
            [(1, bits(-3.0), bits(nan))],
            "{issue} placed for {target:?}"
        );
        let got = min_max_rows(&session.sql(ungrouped).await.unwrap());
        assert_eq!(
            got,
            [(rows.len() as i64, bits(-inf), bits(nan))],
            "{ungrouped} placed for {target:?}"
        );
    }
}

#[tokio::test]
async fn a_join_on_signed_zero_float_keys_matches_them_on_every_placement() {
    use arrow::array::Float64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use oxidelake_storage::{LakeWriterOptions, write_parquet_file};
    // The build side holds 0.0; 150 of the probe side's 3,000 keys are -0.0 and the rest
    // match nothing, so the join's dynamic filter (an IN list of the build keys) looks
    // selective enough to be applied to the probe rows above their Parquet scan.
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, false)]));
    let mut tables = Vec::new();
    for (name, keys) in [
        ("zb", vec![0.0, 9.5]),
        (
            "zp",
            (0..3000)
                .map(|i| {
                    if i % 20 == 0 {
                        -0.0
                    } else {
                        100.0 + f64::from(i)
                    }
                })
                .collect(),
        ),
    ] {
        let table_dir = dir.path().join(name);
        std::fs::create_dir_all(&table_dir).unwrap();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Float64Array::from(keys))],
        )
        .unwrap();
        write_parquet_file(
            table_dir.join("part-0.parquet"),
            Arc::clone(&schema),
            &[batch],
            &LakeWriterOptions::default(),
        )
        .unwrap();
        tables.push((name, format!("{}/", table_dir.display())));
    }
    let sql = "SELECT count(*) FROM zp JOIN zb ON zp.x = zb.x";
    for target in [PlacementTarget::Cpu, PlacementTarget::Cuda] {
        let session = session(target, &tables).await;
        let got = count_of(&session.sql(sql).await.unwrap());
        assert_eq!(got, 150, "{sql} placed for {target:?}");
    }
}
