//! The query shapes TPC-H needs, as the placement rule places them for CUDA on a machine
//! without a GPU (the GPU operators' CPU paths), against stock DataFusion running the
//! same SQL on the same in-memory tables: decimals, dates and strings in filters, two
//! string group keys with decimal sums and averages, joins on two keys (one a string),
//! computed decimal columns, join filters, semi, anti and left outer joins.
//!
//! The fact table `li` has 10 million rows (`OXIDE_BENCH_ROWS` overrides), the dimension
//! `ord` 100,000; 8192-row batches in 2 partitions, `target_partitions = 2`. Half of the
//! fact rows find their order, so joins gather rows from both sides.
//!
//! Run: `cargo bench --workspace --bench shapes` (`OXIDE_BENCH_SHAPES=join,anti` sets up
//! and measures only the shapes whose names contain one of the words;
//! `OXIDE_BENCH_PLANS=1` prints both plans of each). Before measuring, each shape's
//! placed plan is checked to hold the GPU operator it is named after, so a shape the rule
//! stops placing fails loudly instead of timing stock DataFusion twice. Results are in
//! docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Array, Decimal128Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use criterion::{Criterion, criterion_group, criterion_main};
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::displayable;
use datafusion::prelude::{SessionConfig, SessionContext};
use oxidelake_core::BackendKind;
use oxidelake_planner::{
    FixedProbe, HardwarePlacementRule, OxideOptions, PlacementTarget, physical_optimizer_rules,
};

const BATCH_ROWS: usize = 8192;
const PARTITIONS: usize = 2;
const ORDERS: i64 = 100_000;
const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];

fn rows() -> usize {
    std::env::var("OXIDE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000)
}

fn money() -> DataType {
    DataType::Decimal128(15, 2)
}

fn li_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ok", DataType::Int64, false),
        Field::new("reg", DataType::Utf8, false),
        Field::new("qty", money(), false),
        Field::new("price", money(), false),
        Field::new("disc", money(), false),
        Field::new("ship", DataType::Date32, false),
        Field::new("flag", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
    ]))
}

fn ord_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("ok", DataType::Int64, false),
        Field::new("reg", DataType::Utf8, false),
        Field::new("odate", DataType::Date32, false),
    ]))
}

fn decimals(values: impl Iterator<Item = i128>) -> ArrayRef {
    Arc::new(
        Decimal128Array::from_iter_values(values)
            .with_precision_and_scale(15, 2)
            .unwrap(),
    )
}

fn strings(values: impl Iterator<Item = &'static str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

/// `total` rows cut into 8192-row batches dealt round-robin to the partitions.
fn partitions(
    total: usize,
    schema: &SchemaRef,
    batch: impl Fn(std::ops::Range<i64>) -> Vec<ArrayRef>,
) -> Vec<Vec<RecordBatch>> {
    let mut parts = vec![Vec::new(); PARTITIONS];
    let (mut start, mut i) = (0usize, 0usize);
    while start < total {
        let n = BATCH_ROWS.min(total - start);
        let ids = (start as i64)..(start + n) as i64;
        parts[i % PARTITIONS].push(RecordBatch::try_new(Arc::clone(schema), batch(ids)).unwrap());
        start += n;
        i += 1;
    }
    parts
}

/// Fact rows: the order key is a permutation of 0..2·ORDERS (half of them exist in
/// `ord`), its region follows from it (so the two-key join matches as the one-key join
/// does), quantities 1–50, prices, discounts 0.00–0.10, ship dates over seven years.
fn lineitem(total: usize) -> Vec<Vec<RecordBatch>> {
    let schema = li_schema();
    partitions(total, &schema, |ids| {
        let ok: Vec<i64> = ids
            .clone()
            .map(|x| (x * 2_654_435_761) % (2 * ORDERS))
            .collect();
        vec![
            Arc::new(Int64Array::from(ok.clone())) as ArrayRef,
            strings(ok.iter().map(|k| REGIONS[(*k % 5) as usize])),
            decimals(ids.clone().map(|x| i128::from((x * 7_919) % 50 + 1) * 100)),
            decimals(ids.clone().map(|x| i128::from((x * 31) % 100_000 + 90_000))),
            decimals(ids.clone().map(|x| i128::from(x % 11))),
            Arc::new(Date32Array::from_iter_values(
                ids.clone().map(|x| 8_036 + (x * 13 % 2_557) as i32),
            )),
            strings(ids.clone().map(|x| ["A", "N", "R"][(x % 3) as usize])),
            strings(ids.map(|x| ["F", "O"][(x / 3 % 2) as usize])),
        ]
    })
}

fn orders() -> Vec<Vec<RecordBatch>> {
    let schema = ord_schema();
    partitions(ORDERS as usize, &schema, |ids| {
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())) as ArrayRef,
            strings(ids.clone().map(|k| REGIONS[(k % 5) as usize])),
            Arc::new(Date32Array::from_iter_values(
                ids.map(|k| 8_036 + (k * 7 % 2_557) as i32),
            )),
        ]
    })
}

/// A session with the tables; with the placement rule placing for CUDA on a detector
/// that reports no GPU when `placed`, stock DataFusion otherwise.
fn session(placed: bool, li: &[Vec<RecordBatch>], ord: &[Vec<RecordBatch>]) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(PARTITIONS);
    let ctx = if placed {
        let config = config.with_option_extension(OxideOptions {
            placement_target: PlacementTarget::Cuda,
            ..OxideOptions::default()
        });
        let rule = HardwarePlacementRule::new(Arc::new(FixedProbe(BackendKind::CpuSimd)));
        let state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(config)
            .with_physical_optimizer_rules(physical_optimizer_rules(rule))
            .build();
        SessionContext::new_with_state(state)
    } else {
        SessionContext::new_with_config(config)
    };
    let li = MemTable::try_new(li_schema(), li.to_vec()).unwrap();
    let ord = MemTable::try_new(ord_schema(), ord.to_vec()).unwrap();
    ctx.register_table("li", Arc::new(li)).unwrap();
    ctx.register_table("ord", Arc::new(ord)).unwrap();
    ctx
}

/// The shapes: benchmark name, the GPU operators the placed plan must hold, SQL.
const SHAPES: [(&str, &[&str], &str); 8] = [
    (
        "filter_decimal_date_string",
        &["GpuFilterExec"],
        "SELECT ok, price FROM li WHERE ship >= DATE '1994-01-01' \
         AND ship < DATE '1995-01-01' AND disc BETWEEN 0.05 AND 0.07 \
         AND qty < 24 AND flag = 'R'",
    ),
    (
        "aggregate_two_string_keys_decimals",
        &[
            "GpuFilterExec",
            "GpuPartialAggregateExec",
            "GpuProjectionExec",
        ],
        "SELECT flag, status, SUM(qty), SUM(price), SUM(price * (1 - disc)), \
         AVG(qty), AVG(disc), COUNT(*) FROM li WHERE ship <= DATE '1998-09-02' \
         GROUP BY flag, status",
    ),
    (
        "computed_decimal_columns",
        &["GpuProjectionExec"],
        "SELECT ok, price * (1 - disc) AS revenue, qty * 2 - price AS x FROM li",
    ),
    (
        "join_two_keys_one_string",
        &["GpuHashJoinExec"],
        "SELECT li.ok, li.price, ord.odate FROM li JOIN ord \
         ON li.ok = ord.ok AND li.reg = ord.reg",
    ),
    (
        "join_with_filter",
        &["GpuHashJoinExec"],
        "SELECT li.ok, li.price FROM li JOIN ord ON li.ok = ord.ok \
         WHERE li.ship > ord.odate",
    ),
    (
        "semi_join",
        &["GpuHashJoinExec"],
        "SELECT ok, price FROM li WHERE EXISTS (SELECT 1 FROM ord WHERE ord.ok = li.ok)",
    ),
    (
        "anti_join",
        &["GpuHashJoinExec"],
        "SELECT ok, price FROM li WHERE NOT EXISTS \
         (SELECT 1 FROM ord WHERE ord.ok = li.ok)",
    ),
    (
        "left_outer_join",
        &["GpuHashJoinExec"],
        "SELECT li.ok, li.price, ord.odate FROM li LEFT JOIN ord ON li.ok = ord.ok",
    ),
];

fn shapes(c: &mut Criterion) {
    let (li, ord) = (lineitem(rows()), orders());
    let stock = session(false, &li, &ord);
    let placed = session(true, &li, &ord);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(PARTITIONS)
        .build()
        .unwrap();
    // `OXIDE_BENCH_SHAPES=join,anti` sets up only the shapes whose names contain one of
    // the words (criterion's own filter skips measuring, not this setup).
    let picked = std::env::var("OXIDE_BENCH_SHAPES").ok();
    for (name, operators, sql) in SHAPES {
        if picked
            .as_deref()
            .is_some_and(|p| !p.split(',').any(|w| name.contains(w)))
        {
            continue;
        }
        let plan = rt.block_on(async {
            let df = placed.sql(sql).await.unwrap();
            df.create_physical_plan().await.unwrap()
        });
        let text = displayable(plan.as_ref()).indent(true).to_string();
        if std::env::var_os("OXIDE_BENCH_PLANS").is_some() {
            let stock_plan = rt.block_on(async {
                let df = stock.sql(sql).await.unwrap();
                df.create_physical_plan().await.unwrap()
            });
            let stock_text = displayable(stock_plan.as_ref()).indent(true).to_string();
            println!("{name}, placed:\n{text}\n{name}, stock:\n{stock_text}");
        }
        for operator in operators {
            assert!(
                text.contains(operator),
                "{name}: the placed plan has no {operator}:\n{text}"
            );
        }
        // Both sessions return the same number of rows (the conformance and differential
        // suites compare the rows themselves).
        let count = |ctx: &SessionContext| {
            rt.block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() })
                .iter()
                .map(RecordBatch::num_rows)
                .sum::<usize>()
        };
        assert_eq!(count(&placed), count(&stock), "{name}: row counts differ");
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        group.bench_function("oxidelake_placed_cuda_cpu_paths", |b| {
            b.iter(|| {
                rt.block_on(async { placed.sql(sql).await.unwrap().collect().await.unwrap() })
            })
        });
        group.bench_function("datafusion_stock", |b| {
            b.iter(|| rt.block_on(async { stock.sql(sql).await.unwrap().collect().await.unwrap() }))
        });
        group.finish();
    }
}

criterion_group!(benches, shapes);
criterion_main!(benches);
