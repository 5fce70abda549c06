//! The conformance suite (spec §2.3): every Gpu*Exec must return exactly what stock
//! DataFusion returns for the same partitioned input, over seeded random data with
//! NULLs, NaN, ±0.0, ±inf, both ends of Int64, empty batches, 0/1/odd row counts,
//! duplicate and skewed keys (floats among the group keys), and 1 to 4 partitions; the
//! filters compare with -0.0, NaN and ±inf literals too.
//!
//! The stock side is plain SQL over a `MemTable` of the same partitions; our side is the
//! operator built directly over a `MemorySourceConfig` of those partitions. The CPU cases
//! run everywhere; the `*_on_the_detected_gpu` variants are ignored by default and need a
//! CUDA device (`cargo test -p oxidelake-compute --features cuda -- --ignored`).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::JoinType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::MemTable;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, DistanceMetric, Literal, Predicate};
use oxidelake_compute::{
    BackendChoice, GpuFilterExec, GpuHashJoinExec, GpuPartialAggregateExec, GpuProjectionExec,
    GpuVectorDistanceExec,
};
use oxidelake_core::BackendKind;
use oxidelake_device::HardwareDetector;

use super::data::{self, Rng};
use super::plans::cpu;
use super::rows::assert_same_rows;

/// Seeded cases per operator.
const CASES: u64 = 40;

/// Relative tolerance for float results: exact on the CPU (same loops as DataFusion, up
/// to summation order in grouped sums), last-bit differences on devices that sum in
/// parallel.
fn float_tolerance(backend: &BackendChoice, cpu_tolerance: f64) -> f64 {
    if matches!(backend, BackendChoice::Fixed(_)) {
        cpu_tolerance
    } else {
        1e-9
    }
}

/// The placement of an operator meant to run on `backend`: the fixed backend's kind, or
/// the detected GPU's (an operator placed for the CPU runs its CPU path wherever a GPU
/// is, as `oxidelake.placement.cpu_operators` asks).
fn placement_of(backend: &BackendChoice) -> BackendKind {
    match backend {
        BackendChoice::Fixed(b) => b.kind(),
        BackendChoice::Detect => {
            HardwareDetector::shared().map_or(BackendKind::CpuSimd, |b| b.kind())
        }
    }
}

fn source(parts: &[Vec<RecordBatch>], schema: &SchemaRef) -> Arc<dyn ExecutionPlan> {
    MemorySourceConfig::try_new_exec(parts, Arc::clone(schema), None).unwrap()
}

async fn stock(tables: &[(&str, &[Vec<RecordBatch>])], sql: &str) -> Vec<RecordBatch> {
    stock_outcome(tables, sql, false).await.unwrap()
}

/// `sql` over `tables` on a stock session with OxideLake's `min` and `max` and, where
/// `checked_sum`, its `sum`; the error too.
async fn stock_outcome(
    tables: &[(&str, &[Vec<RecordBatch>])],
    sql: &str,
    checked_sum: bool,
) -> datafusion::error::Result<Vec<RecordBatch>> {
    let ctx = SessionContext::new();
    with_oxidelake_min_max(&ctx);
    if checked_sum {
        with_checked_sum(&ctx);
    }
    for (name, parts) in tables {
        let parts: Vec<Vec<RecordBatch>> = if parts.is_empty() {
            vec![vec![]]
        } else {
            parts.to_vec()
        };
        let table = MemTable::try_new(data::schema(), parts).unwrap();
        ctx.register_table(*name, Arc::new(table)).unwrap();
    }
    ctx.sql(sql).await?.collect().await
}

async fn ours(plan: Arc<dyn ExecutionPlan>) -> Vec<RecordBatch> {
    collect(plan, SessionContext::new().task_ctx())
        .await
        .unwrap()
}

fn fallback_batches(plan: &Arc<dyn ExecutionPlan>) -> usize {
    plan.metrics()
        .and_then(|m| m.sum_by_name("cpu_fallback_batches"))
        .map(|v| v.as_usize())
        .unwrap_or(0)
}

/// Filter shapes: (SQL WHERE clause, our predicates), projecting k, a, b. The data has
/// NULLs in every column, so the OR / NOT / IN shapes exercise three-valued logic.
fn filters() -> Vec<(&'static str, Vec<Predicate>)> {
    let p = |column, op, literal| {
        Predicate::Compare(ColumnPredicate {
            column,
            op,
            literal,
        })
    };
    let null = |column, negated| Predicate::IsNull { column, negated };
    vec![
        ("a > 5", vec![p(1, CmpOp::Gt, Literal::Int64(5))]),
        ("a = 0", vec![p(1, CmpOp::Eq, Literal::Int64(0))]),
        (
            "a <= -3 AND b >= 0.0",
            vec![
                p(1, CmpOp::LtEq, Literal::Int64(-3)),
                p(2, CmpOp::GtEq, Literal::Float64(0.0)),
            ],
        ),
        ("b < 12.5", vec![p(2, CmpOp::Lt, Literal::Float64(12.5))]),
        (
            "b > 1000.0",
            vec![p(2, CmpOp::Gt, Literal::Float64(1000.0))],
        ), // only +inf and NaN pass
        (
            "k >= 1 AND a < 50 AND c > -10.0",
            vec![
                p(0, CmpOp::GtEq, Literal::Int64(1)),
                p(1, CmpOp::Lt, Literal::Int64(50)),
                p(3, CmpOp::Gt, Literal::Float64(-10.0)),
            ],
        ),
        (
            "a < -20 OR b > 30.0",
            vec![Predicate::Or(vec![
                p(1, CmpOp::Lt, Literal::Int64(-20)),
                p(2, CmpOp::Gt, Literal::Float64(30.0)),
            ])],
        ),
        (
            "NOT (a > 5)",
            vec![Predicate::Not(Box::new(p(1, CmpOp::Gt, Literal::Int64(5))))],
        ),
        (
            "a IS NULL OR b IS NOT NULL",
            vec![Predicate::Or(vec![null(1, false), null(2, true)])],
        ),
        (
            "a IN (1, 2, 3)",
            vec![Predicate::Or(vec![
                p(1, CmpOp::Eq, Literal::Int64(1)),
                p(1, CmpOp::Eq, Literal::Int64(2)),
                p(1, CmpOp::Eq, Literal::Int64(3)),
            ])],
        ),
        (
            "a NOT IN (0, 4)",
            vec![Predicate::And(vec![
                p(1, CmpOp::NotEq, Literal::Int64(0)),
                p(1, CmpOp::NotEq, Literal::Int64(4)),
            ])],
        ),
        (
            "a != 7 AND NOT (b <= 0.0 OR c IS NULL)",
            vec![
                p(1, CmpOp::NotEq, Literal::Int64(7)),
                Predicate::Not(Box::new(Predicate::Or(vec![
                    p(2, CmpOp::LtEq, Literal::Float64(0.0)),
                    null(3, false),
                ]))),
            ],
        ),
        // Signed zeros: DataFusion compares -0.0 and +0.0 as equal, so each of these
        // keeps both zeros or neither.
        ("b = -0.0", vec![p(2, CmpOp::Eq, Literal::Float64(-0.0))]),
        (
            "b < 0.0 OR c > -0.0",
            vec![Predicate::Or(vec![
                p(2, CmpOp::Lt, Literal::Float64(0.0)),
                p(3, CmpOp::Gt, Literal::Float64(-0.0)),
            ])],
        ),
        (
            "c >= -0.0 AND c <= 0.0",
            vec![
                p(3, CmpOp::GtEq, Literal::Float64(-0.0)),
                p(3, CmpOp::LtEq, Literal::Float64(0.0)),
            ],
        ),
        // Up to three values, DataFusion's plan has an IN list as ORs of `=` (more stay an
        // InListExpr, which compares floats bit for bit: the fuzzer covers those).
        (
            "b IN (0.0, 1.5) OR c NOT IN (-0.0, 2.5)",
            vec![Predicate::Or(vec![
                p(2, CmpOp::Eq, Literal::Float64(0.0)),
                p(2, CmpOp::Eq, Literal::Float64(1.5)),
                Predicate::And(vec![
                    p(3, CmpOp::NotEq, Literal::Float64(-0.0)),
                    p(3, CmpOp::NotEq, Literal::Float64(2.5)),
                ]),
            ])],
        ),
        // NaN equals NaN and sorts above +inf; the infinities are the ends of the rest.
        (
            "b = CAST('NaN' AS DOUBLE)",
            vec![p(2, CmpOp::Eq, Literal::Float64(f64::NAN))],
        ),
        (
            "b > CAST('inf' AS DOUBLE) OR c = CAST('-inf' AS DOUBLE)",
            vec![Predicate::Or(vec![
                p(2, CmpOp::Gt, Literal::Float64(f64::INFINITY)),
                p(3, CmpOp::Eq, Literal::Float64(f64::NEG_INFINITY)),
            ])],
        ),
        (
            "b <> CAST('NaN' AS DOUBLE) AND c < CAST('inf' AS DOUBLE)",
            vec![
                p(2, CmpOp::NotEq, Literal::Float64(f64::NAN)),
                p(3, CmpOp::Lt, Literal::Float64(f64::INFINITY)),
            ],
        ),
    ]
}

async fn filter_cases(backend: BackendChoice) -> usize {
    let schema = data::schema();
    let mut cases = 0;
    let mut rows = 0;
    for seed in 0..CASES {
        let mut rng = Rng::new(seed);
        let parts = data::partitions(&mut rng, 8);
        for (where_sql, predicates) in filters() {
            let plan: Arc<dyn ExecutionPlan> = Arc::new(
                GpuFilterExec::try_new(
                    source(&parts, &schema),
                    predicates,
                    vec![0, 1, 2],
                    placement_of(&backend),
                )
                .unwrap()
                .with_backend(backend.clone()),
            );
            let got = ours(Arc::clone(&plan)).await;
            let want = stock(
                &[("t", &parts)],
                &format!("SELECT k, a, b FROM t WHERE {where_sql}"),
            )
            .await;
            rows += assert_same_rows(
                &format!("filter seed {seed} WHERE {where_sql}"),
                &got,
                &want,
                0.0,
            );
            if !matches!(backend, BackendChoice::Fixed(_)) {
                assert_eq!(fallback_batches(&plan), 0, "GPU run fell back to the CPU");
            }
            cases += 1;
        }
    }
    assert!(rows > 1_000, "the random cases compared only {rows} rows");
    cases
}

async fn join_cases(backend: BackendChoice) -> usize {
    let schema = data::schema();
    let mut cases = 0;
    let mut rows = 0;
    // Inner, then the same inputs as right-semi and right-anti joins (EXISTS / NOT EXISTS);
    // then right outer joins, two keys (numbered on the host) and join filters.
    let shapes = [
        (
            JoinType::Inner,
            false,
            false,
            "SELECT * FROM l JOIN r ON l.k = r.k",
        ),
        (
            JoinType::RightSemi,
            false,
            false,
            "SELECT * FROM r WHERE EXISTS (SELECT 1 FROM l WHERE l.k = r.k)",
        ),
        (
            JoinType::RightAnti,
            false,
            false,
            "SELECT * FROM r WHERE NOT EXISTS (SELECT 1 FROM l WHERE l.k = r.k)",
        ),
        (
            JoinType::Inner,
            true,
            false,
            "SELECT * FROM l JOIN r ON l.k = r.k AND l.a = r.a",
        ),
        (
            JoinType::Inner,
            false,
            true,
            "SELECT * FROM l JOIN r ON l.k = r.k AND l.a < r.a",
        ),
        (
            JoinType::Right,
            false,
            false,
            "SELECT * FROM l RIGHT JOIN r ON l.k = r.k",
        ),
        (
            JoinType::Right,
            true,
            true,
            "SELECT * FROM l RIGHT JOIN r ON l.k = r.k AND l.a = r.a AND l.a < r.a",
        ),
        (
            JoinType::RightSemi,
            false,
            true,
            "SELECT * FROM r WHERE EXISTS (SELECT 1 FROM l WHERE l.k = r.k AND l.a < r.a)",
        ),
        (
            JoinType::RightAnti,
            false,
            true,
            "SELECT * FROM r WHERE NOT EXISTS (SELECT 1 FROM l WHERE l.k = r.k AND l.a < r.a)",
        ),
    ];
    for seed in 0..CASES {
        let mut rng = Rng::new(1_000 + seed);
        let key_range = [4, 16, 64][seed as usize % 3];
        let (left, right) = (
            data::partitions(&mut rng, key_range),
            data::partitions(&mut rng, key_range),
        );
        for (shape, (join_type, two_keys, filtered, sql)) in shapes.into_iter().enumerate() {
            // The first three shapes on every seed, the later six on every other one
            // (the suite runs three times in CI: tests, emulated driver).
            if shape >= 3 && seed % 2 == 1 {
                continue;
            }
            let on = if two_keys {
                vec![(0, 0), (1, 1)]
            } else {
                vec![(0, 0)]
            };
            let plan: Arc<dyn ExecutionPlan> = Arc::new(
                GpuHashJoinExec::try_new_on(
                    source(&left, &schema),
                    source(&right, &schema),
                    on,
                    filtered.then(left_a_below_right_a),
                    join_type,
                    placement_of(&backend),
                )
                .unwrap()
                .with_backend(backend.clone()),
            );
            let got = ours(Arc::clone(&plan)).await;
            let want = stock(&[("l", &left), ("r", &right)], sql).await;
            rows += assert_same_rows(
                &format!("{sql}: seed {seed} keys {key_range}"),
                &got,
                &want,
                0.0,
            );
            if !matches!(backend, BackendChoice::Fixed(_)) {
                assert_eq!(fallback_batches(&plan), 0, "GPU run fell back to the CPU");
            }
            cases += 1;
        }
    }
    assert!(rows > 1_000, "the random cases compared only {rows} rows");
    cases
}

/// The join filter `l.a < r.a` (column 1 of each side).
fn left_a_below_right_a() -> JoinFilter {
    let intermediate = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
    ]));
    let expression = Arc::new(BinaryExpr::new(
        Arc::new(Column::new("a", 0)),
        Operator::Lt,
        Arc::new(Column::new("a", 1)),
    ));
    JoinFilter::new(
        expression,
        JoinFilter::build_column_indices(vec![1], vec![1]),
        intermediate,
    )
}

/// Foreign-key shape: unique build keys, every non-null probe key present, so whole probe
/// batches match one-to-one in order (the join's no-copy path) except where NULLs occur.
async fn foreign_key_join_cases() -> usize {
    let schema = data::schema();
    let mut cases = 0;
    for seed in 0..CASES {
        let mut rng = Rng::new(4_000 + seed);
        let keys: Vec<i64> = (0..64).collect();
        let mut build = data::batch(&mut rng, 64, 64);
        let mut columns = build.columns().to_vec();
        columns[0] = Arc::new(arrow::array::Int64Array::from(keys));
        build = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
        let probe = data::partitions(&mut rng, 64);
        let left = vec![vec![build]];
        let plan: Arc<dyn ExecutionPlan> = Arc::new(
            GpuHashJoinExec::try_new(
                source(&left, &schema),
                source(&probe, &schema),
                0,
                0,
                BackendKind::CpuSimd,
            )
            .unwrap()
            .with_backend(cpu()),
        );
        let got = ours(plan).await;
        let want = stock(
            &[("l", &left), ("r", &probe)],
            "SELECT * FROM l JOIN r ON l.k = r.k",
        )
        .await;
        assert_same_rows(&format!("foreign-key join seed {seed}"), &got, &want, 0.0);
        cases += 1;
    }
    cases
}

/// Prints a conformance count, and appends it to the file `OXIDE_CONFORMANCE_LOG` names
/// (`.ci/run` reads the counts of its test run there instead of running the suite again
/// with its output shown).
fn report(line: String) {
    eprintln!("{line}");
    if let Ok(path) = std::env::var("OXIDE_CONFORMANCE_LOG") {
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path);
        if let Err(e) = file.and_then(|mut f| writeln!(f, "{line}")) {
            eprintln!("cannot append to OXIDE_CONFORMANCE_LOG {path}: {e}");
        }
    }
}

/// Registers the `min` and `max` every OxideLake session has in place of DataFusion's
/// (`total_order_min_max_udafs`): their grouped form over floats orders NaN as the
/// ungrouped form does, so a grouped MIN/MAX over NaNs has one answer to compare with.
fn with_oxidelake_min_max(ctx: &SessionContext) {
    for f in oxidelake_compute::total_order_min_max_udafs() {
        ctx.register_udaf(f.as_ref().clone());
    }
}

/// Registers the `sum` every OxideLake session has in place of DataFusion's
/// (`checked_sum_udaf`): an overflow is an error, and its state over integers is the
/// wrapped sum and a wrap count.
fn with_checked_sum(ctx: &SessionContext) {
    ctx.register_udaf(oxidelake_compute::checked_sum_udaf().as_ref().clone());
}

/// A session state whose optimizer keeps partial and final aggregates apart, as they
/// are where the placement rule runs (before `CombinePartialFinalAggregate`).
fn uncombined_aggregates() -> datafusion::execution::SessionState {
    let rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new()
        .rules
        .into_iter()
        .filter(|r| r.name() != "CombinePartialFinalAggregate")
        .collect();
    datafusion::execution::SessionStateBuilder::new()
        .with_default_features()
        .with_physical_optimizer_rules(rules)
        .build()
}

/// The stock plan of `sql` over `parts` as table `t`, with its partial aggregate replaced
/// by a GpuPartialAggregateExec on `backend` (as the placement rule does); and that node,
/// whose metrics count fallbacks. `checked_sum`: with OxideLake's `sum`.
async fn with_device_partial(
    parts: &[Vec<RecordBatch>],
    sql: &str,
    backend: &BackendChoice,
    checked_sum: bool,
) -> (
    Arc<dyn ExecutionPlan>,
    SessionContext,
    Arc<dyn ExecutionPlan>,
) {
    let ctx = SessionContext::new_with_state(uncombined_aggregates());
    with_oxidelake_min_max(&ctx);
    if checked_sum {
        with_checked_sum(&ctx);
    }
    let parts: Vec<Vec<RecordBatch>> = if parts.is_empty() {
        vec![vec![]]
    } else {
        parts.to_vec()
    };
    let table = MemTable::try_new(data::schema(), parts).unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut device = None;
    let plan = plan
        .transform_up(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            if !matches!(agg.mode(), AggregateMode::Partial) {
                return Ok(Transformed::no(node));
            }
            let gpu: Arc<dyn ExecutionPlan> = Arc::new(
                GpuPartialAggregateExec::try_replacing(agg, BackendKind::Cuda)
                    .unwrap()
                    .with_backend(backend.clone()),
            );
            device = Some(Arc::clone(&gpu));
            Ok(Transformed::yes(gpu))
        })
        .unwrap()
        .data;
    let device = device.unwrap_or_else(|| panic!("no partial aggregate in {sql}"));
    (plan, ctx, device)
}

async fn aggregate_cases(backend: BackendChoice) -> usize {
    // MIN/MAX over b (with NaN) too: the reference runs OxideLake's `min`/`max`, whose
    // grouped form orders floats in total order as the device and the ungrouped form do
    // (DataFusion 55.2's grouped form is order-dependent with NaN). SUM/COUNT/AVG over b:
    // NaN propagates the same way in any order.
    let shapes = [
        // (No AVG over a: its i64 extremes as doubles cancel catastrophically, so any
        // two summation orders disagree; AVG over integers is checked in the planner's
        // partial_aggregate test.)
        "SELECT k, SUM(a), COUNT(a), MIN(a), MAX(a), SUM(b), COUNT(b), MIN(b), MAX(b), \
         MIN(c), MAX(c), SUM(c), AVG(b), AVG(c), COUNT(*) FROM t GROUP BY k",
        "SELECT SUM(a), COUNT(*), AVG(c), MIN(a), MAX(c), MIN(b), MAX(b) FROM t",
        "SELECT a, k, COUNT(*), SUM(c) FROM t GROUP BY a, k",
        // Float keys: -0.0 and +0.0 are one group (DataFusion's grouping folds the sign),
        // NaN is one group, ±inf are groups of their own.
        "SELECT b, COUNT(*), SUM(c), MIN(a), MAX(a) FROM t GROUP BY b",
        "SELECT k, c, COUNT(*), AVG(b), MIN(b), MAX(b) FROM t GROUP BY k, c",
    ];
    let mut cases = 0;
    let mut rows = 0;
    let (mut exact_sums, mut overflows) = (0, 0);
    for seed in 0..CASES {
        let mut rng = Rng::new(2_000 + seed);
        let parts = data::partitions(&mut rng, [1, 5, 16][seed as usize % 3]);
        for sql in shapes {
            let (plan, ctx, device) = with_device_partial(&parts, sql, &backend, false).await;
            let got = collect(plan, ctx.task_ctx()).await.unwrap();
            let want = stock(&[("t", &parts)], sql).await;
            // Float sums may differ in the last bits: the summation order differs.
            rows += assert_same_rows(
                &format!("aggregate seed {seed}: {sql}"),
                &got,
                &want,
                float_tolerance(&backend, 1e-12),
            );
            if !matches!(backend, BackendChoice::Fixed(_)) {
                assert_eq!(fallback_batches(&device), 0, "GPU run fell back to the CPU");
            }
            cases += 1;
        }
        for sql in CHECKED_SUM_SHAPES {
            let (plan, ctx, device) = with_device_partial(&parts, sql, &backend, true).await;
            let got = collect(plan, ctx.task_ctx()).await;
            let want = stock_outcome(&[("t", &parts)], sql, true).await;
            let label = format!("checked sum seed {seed}: {sql}");
            match (&got, &want) {
                (Ok(got), Ok(want)) => {
                    rows += assert_same_rows(&label, got, want, 0.0);
                    exact_sums += 1;
                }
                (Err(g), Err(w))
                    if g.to_string().contains(SUM_OVERFLOW)
                        && w.to_string().contains(SUM_OVERFLOW) =>
                {
                    overflows += 1;
                }
                _ => panic!(
                    "{label}\nours: {:?}\nstock: {:?}",
                    got.as_ref().map(|b| b.len()),
                    want.as_ref().map(|b| b.len())
                ),
            }
            if !matches!(backend, BackendChoice::Fixed(_)) {
                assert_eq!(fallback_batches(&device), 0, "GPU run fell back to the CPU");
            }
            cases += 1;
        }
    }
    // Aggregates output one row per group (at most 17 keys here).
    assert!(rows > 100, "the random cases compared only {rows} groups");
    assert!(
        exact_sums > 0 && overflows > 0,
        "the checked sums ended {exact_sums} times exact and {overflows} times in the overflow \
         error: both must come up"
    );
    cases
}

/// The overflow error of OxideLake's `sum` over `a` (`sum_overflow_error`).
const SUM_OVERFLOW: &str = "Arithmetic overflow: SUM over Int64 exceeds its range";

/// Shapes summing `a` (whose values include both ends of Int64) with OxideLake's checked
/// `sum` on both sides: its two-column state (the wrapped sum and its wrap count) from
/// the device partial under the stock final, against DataFusion's aggregates with the
/// same `sum`. The answer is the same rows or the same overflow error.
const CHECKED_SUM_SHAPES: [&str; 3] = [
    // Most totals leave Int64 (the heavy key 0 holds many of a's ends).
    "SELECT k, SUM(a), COUNT(*) FROM t GROUP BY k",
    "SELECT SUM(a), COUNT(a) FROM t WHERE a > 100 OR a < -100",
    // Every value and its negation (i64::MIN has none): each group's total is 0, while
    // a partition holding the first half's ends sums past Int64. Only the total decides,
    // however the rows are partitioned (issue 44).
    "SELECT k, SUM(x), COUNT(x) FROM (\
       SELECT k, a AS x FROM t WHERE a >= -9223372036854775807 \
       UNION ALL SELECT k, 0 - a AS x FROM t WHERE a >= -9223372036854775807\
     ) u GROUP BY k",
];

async fn vector_cases(backend: BackendChoice) -> usize {
    let schema = data::schema();
    let query = [1.0f32, -2.5, 0.5, 3.0];
    let mut cases = 0;
    let mut rows = 0;
    for seed in 0..CASES {
        let mut rng = Rng::new(3_000 + seed);
        let parts = data::partitions(&mut rng, 4);
        for (metric, function) in [
            (DistanceMetric::L2, "array_distance"),
            (DistanceMetric::Cosine, "cosine_distance"),
        ] {
            let plan: Arc<dyn ExecutionPlan> = Arc::new(
                GpuVectorDistanceExec::try_new(
                    source(&parts, &schema),
                    4,
                    query.to_vec(),
                    metric,
                    "d",
                    placement_of(&backend),
                )
                .unwrap()
                .with_backend(backend.clone()),
            );
            let got = ours(Arc::clone(&plan)).await;
            let sql = format!("SELECT k, a, b, c, v, {function}(v, [1.0, -2.5, 0.5, 3.0]) FROM t");
            let want = stock(&[("t", &parts)], &sql).await;
            rows += assert_same_rows(
                &format!("vector seed {seed} {function}"),
                &got,
                &want,
                float_tolerance(&backend, 0.0),
            );
            if !matches!(backend, BackendChoice::Fixed(_)) {
                assert_eq!(fallback_batches(&plan), 0, "GPU run fell back to the CPU");
            }
            cases += 1;
        }
    }
    assert!(rows > 1_000, "the random cases compared only {rows} rows");
    cases
}

/// Projection shapes: (SQL select list, whether a batch may overflow the device's 64-bit
/// decimals and so be computed by DataFusion). `a` holds i64::MAX, i64::MIN + 1 and
/// i64::MIN, so the integer shapes wrap and the decimal ones overflow now and then; `b`
/// and `c` hold ±0.0 and ±inf (`-b` keeps the sign of zero), `b` NaN.
const PROJECTIONS: [(&str, bool); 6] = [
    ("k, a * 3 - k AS x", false),
    ("b * c + 1.5 AS x, -b AS y, k", false),
    ("CAST(k AS DOUBLE) * b - CAST(a AS DOUBLE) AS x", false),
    (
        "CAST(a AS DECIMAL(22, 2)) * CAST(k AS DECIMAL(20, 1)) AS x",
        true,
    ),
    (
        "CAST(k AS DECIMAL(21, 2)) + CAST(a AS DECIMAL(20, 0)) - CAST(1.25 AS DECIMAL(3, 2)) AS x",
        true,
    ),
    ("-(CAST(k AS DECIMAL(20, 0)) * 7) AS x, a + k AS y", false),
];

/// The stock plan of `SELECT {select} FROM t` and the same plan with its projection
/// replaced by a GpuProjectionExec.
async fn projection_plans(
    parts: &[Vec<RecordBatch>],
    select: &str,
    backend: &BackendChoice,
) -> (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>) {
    let ctx = SessionContext::new();
    let parts: Vec<Vec<RecordBatch>> = if parts.is_empty() {
        vec![vec![]]
    } else {
        parts.to_vec()
    };
    let table = MemTable::try_new(data::schema(), parts).unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let stock = ctx
        .sql(&format!("SELECT {select} FROM t"))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let ours = Arc::clone(&stock)
        .transform_up(|node| {
            let Some(p) = node.downcast_ref::<ProjectionExec>() else {
                return Ok(Transformed::no(node));
            };
            let gpu = GpuProjectionExec::try_new(
                p.expr().to_vec(),
                Arc::clone(p.input()),
                placement_of(backend),
            )?
            .with_backend(backend.clone());
            Ok(Transformed::yes(Arc::new(gpu) as Arc<dyn ExecutionPlan>))
        })
        .unwrap();
    assert!(ours.transformed, "no projection in the plan of {select}");
    (stock, ours.data)
}

fn gpu_projection_of(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    let mut node = Arc::clone(plan);
    while !node.is::<GpuProjectionExec>() {
        node = Arc::clone(node.children()[0]);
    }
    node
}

async fn projection_cases(backend: BackendChoice) -> usize {
    let (mut cases, mut rows, mut fell_back) = (0, 0, 0);
    for seed in 0..CASES {
        let mut rng = Rng::new(seed);
        let parts = data::partitions(&mut rng, 8);
        for (select, may_overflow) in PROJECTIONS {
            let (stock, ours) = projection_plans(&parts, select, &backend).await;
            let want = collect(stock, SessionContext::new().task_ctx())
                .await
                .unwrap();
            let got = collect(Arc::clone(&ours), SessionContext::new().task_ctx())
                .await
                .unwrap();
            rows += assert_same_rows(
                &format!("projection seed {seed}: {select}"),
                &got,
                &want,
                0.0,
            );
            let fallbacks = fallback_batches(&gpu_projection_of(&ours));
            if may_overflow {
                fell_back += fallbacks;
            } else {
                assert_eq!(fallbacks, 0, "{select}: a batch left the backend");
            }
            cases += 1;
        }
    }
    assert!(rows > 1_000, "the random cases compared only {rows} rows");
    assert!(
        fell_back > 0,
        "no decimal batch overflowed: the fallback went untested"
    );
    cases
}

#[tokio::test]
async fn gpu_projection_exec_on_cpu_equals_stock_arithmetic_with_wrapping_and_decimal_overflow() {
    let n = projection_cases(cpu()).await;
    report(format!(
        "conformance: GpuProjectionExec[cpu]: {n} cases equal to stock DataFusion"
    ));
    assert_eq!(n, CASES as usize * PROJECTIONS.len());
}

#[tokio::test]
async fn gpu_filter_exec_on_cpu_equals_stock_filter_and_projection() {
    let n = filter_cases(cpu()).await;
    report(format!(
        "conformance: GpuFilterExec[cpu]: {n} cases equal to stock DataFusion"
    ));
    assert_eq!(n, CASES as usize * filters().len());
}

#[tokio::test]
async fn gpu_hash_join_exec_on_cpu_equals_stock_inner_right_semi_anti_two_key_and_filtered_joins() {
    let n = join_cases(cpu()).await;
    report(format!(
        "conformance: GpuHashJoinExec[cpu]: {n} cases equal to stock DataFusion"
    ));
    assert_eq!(n, CASES as usize * 3 + CASES as usize / 2 * 6);
}

#[tokio::test]
async fn gpu_hash_join_exec_on_cpu_equals_stock_on_foreign_key_joins() {
    let n = foreign_key_join_cases().await;
    report(format!(
        "conformance: GpuHashJoinExec[cpu] foreign-key: {n} cases equal to stock DataFusion"
    ));
    assert_eq!(n, CASES as usize);
}

#[tokio::test]
async fn gpu_partial_aggregate_exec_on_cpu_under_the_stock_final_equals_stock_aggregates() {
    let n = aggregate_cases(cpu()).await;
    report(format!(
        "conformance: GpuPartialAggregateExec[cpu]: {n} cases equal to stock DataFusion"
    ));
    assert_eq!(n, CASES as usize * (5 + CHECKED_SUM_SHAPES.len()));
}

#[tokio::test]
async fn gpu_vector_distance_exec_on_cpu_equals_stock_distance_functions() {
    let n = vector_cases(cpu()).await;
    report(format!(
        "conformance: GpuVectorDistanceExec[cpu]: {n} cases equal to stock DataFusion"
    ));
    assert_eq!(n, CASES as usize * 2);
}

#[test]
fn the_seeded_data_holds_signed_zeros_nan_infinities_and_both_ends_of_int64() {
    // The inputs of the filter cases (the other operators' are drawn alike).
    let mut counts = data::EdgeCounts::default();
    for seed in 0..CASES {
        counts.add(&data::partitions(&mut Rng::new(seed), 8));
    }
    report(format!(
        "conformance data: the filter cases' inputs hold {}",
        counts.describe()
    ));
    assert!(
        counts.b.has_signed_zeros_and_infinities() && counts.b.nan > 0,
        "{counts:?}"
    );
    assert!(counts.c.has_signed_zeros_and_infinities(), "{counts:?}");
    let v = counts.vectors;
    assert!(
        v.nan > 0 && v.pos_inf > 0 && v.neg_inf > 0 && v.neg_zero > 0 && v.pos_zero > 0,
        "{counts:?}"
    );
    assert!(counts.int64_max > 0 && counts.int64_min > 0, "{counts:?}");
}

fn detected_gpu() -> BackendChoice {
    let backend = HardwareDetector::select().unwrap();
    assert_ne!(
        backend.kind(),
        BackendKind::CpuSimd,
        "no GPU backend detected"
    );
    BackendChoice::Detect
}

#[tokio::test]
#[ignore = "needs a CUDA device: cargo test -p oxidelake-compute --features cuda -- --ignored"]
async fn every_operator_on_the_detected_gpu_equals_stock_datafusion_without_cpu_fallback() {
    let backend = detected_gpu();
    let n = filter_cases(backend.clone()).await
        + join_cases(backend.clone()).await
        + aggregate_cases(backend.clone()).await
        + projection_cases(backend.clone()).await
        + vector_cases(backend).await;
    report(format!(
        "conformance: {n} GPU cases equal to stock DataFusion"
    ));
}
