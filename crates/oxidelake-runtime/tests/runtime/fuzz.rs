//! Differential fuzzer: random queries over the TPC-H schema (SF 0.01) and over
//! NULL-heavy tables derived from it — filters with comparisons, BETWEEN, IN, LIKE,
//! IS NULL, AND/OR/NOT over integers, decimals, dates and strings, joins (one key, two
//! keys with a string and NULLs, join filters, semi, anti and left outer joins) and
//! group-bys —
//! run placed for cpu and placed for cuda; every result must be identical.
//!
//! `OXIDE_FUZZ_QUERIES` (default 2000) and `OXIDE_FUZZ_SEED` (default 1) choose the run;
//! `OXIDE_FUZZ_DEVICE_RESIDENT=1` runs the cuda session with device-resident batches
//! (ADR-0014); the longer run is in docs/placement-coverage.md. A failure prints the seed, the query
//! number and the SQL, so it can be replayed.

use std::sync::Arc;

use oxidelake_core::BackendKind;
use oxidelake_planner::{FixedProbe, OperatorFamily, PlacementCoverage};
use oxidelake_runtime::cli::tables::register_data_dir;
use oxidelake_runtime::{OxideSession, PlacementTarget};

use super::data::{sorted_rows, tpch_lake};

/// SplitMix64: small, seedable, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Int,
    Decimal,
    Date,
    Text(&'static [&'static str]),
}

/// A column a predicate can use: its name, kind, and the range its literals come from.
#[derive(Clone, Copy)]
struct Col {
    name: &'static str,
    kind: Kind,
    lo: i64,
    hi: i64,
}

const MODES: &[&str] = &["AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "REG AIR"];
const FLAGS: &[&str] = &["A", "N", "R"];
const PRIORITIES: &[&str] = &["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];

/// Tables the fuzzer queries, with their key (for group-bys) and predicate columns.
struct Table {
    name: &'static str,
    key: &'static str,
    cols: Vec<Col>,
}

fn tables() -> Vec<Table> {
    let c = |name, kind, lo, hi| Col { name, kind, lo, hi };
    let lineitem = vec![
        c("l_orderkey", Kind::Int, 1, 60_000),
        c("l_linenumber", Kind::Int, 1, 7),
        c("l_quantity", Kind::Decimal, 100, 5_000),
        c("l_discount", Kind::Decimal, 0, 10),
        c("l_shipdate", Kind::Date, 8_000, 10_500),
        c("l_shipmode", Kind::Text(MODES), 0, 0),
        c("l_returnflag", Kind::Text(FLAGS), 0, 0),
    ];
    vec![
        Table {
            name: "li",
            key: "l_orderkey",
            cols: lineitem,
        },
        Table {
            name: "ord",
            key: "o_custkey",
            cols: vec![
                c("o_orderkey", Kind::Int, 1, 60_000),
                c("o_custkey", Kind::Int, 1, 1_500),
                c("o_totalprice", Kind::Decimal, 100_000, 50_000_000),
                c("o_orderdate", Kind::Date, 8_000, 10_500),
                c("o_orderpriority", Kind::Text(PRIORITIES), 0, 0),
                c("o_shippriority", Kind::Int, 0, 1),
            ],
        },
        Table {
            name: "lnull",
            key: "orderkey",
            cols: vec![
                c("orderkey", Kind::Int, 1, 60_000),
                c("quantity", Kind::Decimal, 100, 5_000),
                c("shipdate", Kind::Date, 8_000, 10_500),
                c("shipmode", Kind::Text(MODES), 0, 0),
                c("discount", Kind::Decimal, 0, 10),
            ],
        },
    ]
}

/// In-memory tables the queries read: a quarter of lineitem and orders (so 2,000 queries
/// compare their full results in about a minute), and a NULL-heavy copy of that lineitem
/// with a different column NULL per line number.
const SETUP: [&str; 3] = [
    "CREATE TABLE li AS SELECT * FROM lineitem WHERE l_orderkey <= 15000",
    "CREATE TABLE ord AS SELECT * FROM orders WHERE o_orderkey <= 15000",
    LNULL,
];

const LNULL: &str = "CREATE TABLE lnull AS SELECT \
    CASE WHEN l_linenumber = 1 THEN NULL ELSE l_orderkey END AS orderkey, \
    CASE WHEN l_linenumber IN (2, 3) THEN NULL ELSE l_quantity END AS quantity, \
    CASE WHEN l_linenumber = 3 THEN NULL ELSE l_shipdate END AS shipdate, \
    CASE WHEN l_linenumber >= 4 THEN NULL ELSE l_shipmode END AS shipmode, \
    CASE WHEN l_linenumber % 2 = 0 THEN NULL ELSE l_discount END AS discount \
    FROM li";

fn literal(rng: &mut Rng, col: &Col) -> String {
    let v = col.lo + rng.below((col.hi - col.lo + 1) as u64) as i64;
    match col.kind {
        Kind::Int => v.to_string(),
        // A bare 12.34 is a Float64 in DataFusion's SQL; the cast makes it a decimal.
        Kind::Decimal => format!("CAST({}.{:02} AS DECIMAL(15, 2))", v / 100, v % 100),
        Kind::Date => {
            // Days since 1970-01-01 as an ISO date, through the civil-from-days formula.
            let z = v + 719_468;
            let era = z.div_euclid(146_097);
            let doe = z - era * 146_097;
            let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            let mp = (5 * doy + 2) / 153;
            let d = doy - (153 * mp + 2) / 5 + 1;
            let m = if mp < 10 { mp + 3 } else { mp - 9 };
            let y = yoe + era * 400 + i64::from(m <= 2);
            format!("DATE '{y:04}-{m:02}-{d:02}'")
        }
        Kind::Text(values) => format!("'{}'", rng.pick(values)),
    }
}

fn leaf(rng: &mut Rng, cols: &[Col]) -> String {
    let col = rng.pick(cols);
    let ops = ["=", "<>", "<", "<=", ">", ">="];
    match (rng.below(10), col.kind) {
        (0, _) => format!("{} IS NULL", col.name),
        (1, _) => format!("{} IS NOT NULL", col.name),
        (2, _) => {
            let n = 1 + rng.below(4);
            let items: Vec<String> = (0..n).map(|_| literal(rng, col)).collect();
            let not = if rng.below(3) == 0 { " NOT" } else { "" };
            format!("{}{not} IN ({})", col.name, items.join(", "))
        }
        (3, Kind::Text(values)) => {
            let v = rng.pick(values);
            let pattern = match rng.below(4) {
                0 => format!("{}%", &v[..1]),
                1 => format!("%{}", &v[v.len() - 1..]),
                2 => format!("%{}%", &v[..v.len().min(2)]),
                // `_` keeps the filter on the CPU: the comparison still must agree.
                _ => format!("{}_%", &v[..1]),
            };
            let not = if rng.below(3) == 0 { " NOT" } else { "" };
            format!("{}{not} LIKE '{pattern}'", col.name)
        }
        (4, Kind::Int | Kind::Decimal | Kind::Date) => {
            let (a, b) = (literal(rng, col), literal(rng, col));
            format!("{} BETWEEN {a} AND {b}", col.name)
        }
        // Arithmetic on one side: the filter compares a computed column.
        (5, Kind::Int | Kind::Decimal) => {
            let other = numeric(rng, cols);
            let m = 1 + rng.below(3);
            format!(
                "{} * {m} - {} {} {}",
                col.name,
                other.name,
                rng.pick(&ops),
                literal(rng, col)
            )
        }
        _ => format!("{} {} {}", col.name, rng.pick(&ops), literal(rng, col)),
    }
}

/// A random Int or Decimal column of `cols` (every table has one).
fn numeric<'a>(rng: &mut Rng, cols: &'a [Col]) -> &'a Col {
    let numbers: Vec<&Col> = cols
        .iter()
        .filter(|c| matches!(c.kind, Kind::Int | Kind::Decimal))
        .collect();
    numbers[rng.below(numbers.len() as u64) as usize]
}

/// An arithmetic expression over numeric columns: integers wrap, decimals are exact,
/// mixed ones are cast to decimals (all placed on a GPU projection).
fn arithmetic(rng: &mut Rng, cols: &[Col]) -> String {
    let (a, b) = (numeric(rng, cols).name, numeric(rng, cols).name);
    match rng.below(4) {
        0 => format!("{a} * (1 - {b})"),
        1 => format!("{a} + {b} * 2"),
        2 => format!("-{a} - {b}"),
        _ => format!("{a} * {b} - 3"),
    }
}

fn predicate(rng: &mut Rng, cols: &[Col], depth: u32) -> String {
    if depth == 0 || rng.below(3) == 0 {
        return leaf(rng, cols);
    }
    match rng.below(3) {
        0 => format!(
            "({} AND {})",
            predicate(rng, cols, depth - 1),
            predicate(rng, cols, depth - 1)
        ),
        1 => format!(
            "({} OR {})",
            predicate(rng, cols, depth - 1),
            predicate(rng, cols, depth - 1)
        ),
        _ => format!("NOT ({})", predicate(rng, cols, depth - 1)),
    }
}

fn query(rng: &mut Rng, tables: &[Table]) -> String {
    let t = rng.pick(tables);
    let names: Vec<&str> = t.cols.iter().map(|c| c.name).collect();
    let pred = predicate(rng, &t.cols, 3);
    match rng.below(5) {
        0 | 1 => format!("SELECT {} FROM {} WHERE {pred}", names.join(", "), t.name),
        4 => format!(
            "SELECT {}, {} AS x, {} AS y FROM {} WHERE {pred}",
            t.key,
            arithmetic(rng, &t.cols),
            arithmetic(rng, &t.cols),
            t.name
        ),
        2 => {
            // One to three keys (or none), string keys included; COUNT(*) and, per
            // column kind, the aggregates that mean something for it.
            let keys: Vec<&str> = match rng.below(4) {
                0 => Vec::new(),
                1 => vec![t.key],
                _ => (0..1 + rng.below(3))
                    .map(|_| rng.pick(&t.cols).name)
                    .collect(),
            };
            let col = rng.pick(&t.cols);
            let c = col.name;
            let mut aggs = vec![format!("COUNT({c})"), "COUNT(*)".to_string()];
            if !matches!(col.kind, Kind::Text(_)) {
                aggs.push(format!("MIN({c})"));
                aggs.push(format!("MAX({c})"));
            }
            if matches!(col.kind, Kind::Int | Kind::Decimal) {
                aggs.push(format!("SUM({c})"));
                aggs.push(format!("AVG({c})"));
            }
            aggs.push(format!("SUM({})", arithmetic(rng, &t.cols)));
            let mut keys_unique = keys;
            keys_unique.sort_unstable();
            keys_unique.dedup();
            let select: Vec<String> = keys_unique
                .iter()
                .map(ToString::to_string)
                .chain(aggs)
                .collect();
            let group_by = if keys_unique.is_empty() {
                String::new()
            } else {
                format!(" GROUP BY {}", keys_unique.join(", "))
            };
            format!(
                "SELECT {} FROM {} WHERE {pred}{group_by}",
                select.join(", "),
                t.name
            )
        }
        _ => {
            let lpred = predicate(rng, &tables[0].cols, 2);
            let opred = predicate(rng, &tables[1].cols, 2);
            let k = rng.below(5);
            match rng.below(6) {
                0 => format!(
                    "SELECT o_orderkey, o_orderdate, l_linenumber, l_shipmode FROM ord \
                     JOIN li ON o_orderkey = l_orderkey WHERE {lpred} AND {opred}"
                ),
                // A join filter on the key-matched pairs.
                1 => format!(
                    "SELECT o_orderkey, o_orderdate, l_linenumber FROM ord \
                     JOIN li ON o_orderkey = l_orderkey AND l_linenumber > o_shippriority + {k} \
                     WHERE {lpred} AND {opred}"
                ),
                // Two keys, one a string, with NULLs in both (lnull).
                2 => format!(
                    "SELECT orderkey, shipmode, l_linenumber, l_quantity FROM lnull \
                     JOIN li ON orderkey = l_orderkey AND shipmode = l_shipmode WHERE {lpred}"
                ),
                // Semi and anti joins whose match also needs the filter.
                3 => format!(
                    "SELECT o_orderkey, o_orderdate FROM ord WHERE EXISTS (SELECT 1 FROM li \
                     WHERE l_orderkey = o_orderkey AND l_linenumber > o_shippriority + {k} \
                     AND {lpred}) AND {opred}"
                ),
                // A left outer join whose ON has a filter: unmatched orders keep NULLs.
                4 => format!(
                    "SELECT o_orderkey, o_orderdate, l_linenumber, l_quantity FROM ord \
                     LEFT JOIN li ON o_orderkey = l_orderkey \
                     AND l_linenumber > o_shippriority + {k} WHERE {opred}"
                ),
                _ => format!(
                    "SELECT o_orderkey, o_orderdate FROM ord WHERE NOT EXISTS (SELECT 1 FROM li \
                     WHERE l_orderkey = o_orderkey AND l_linenumber > o_shippriority + {k} \
                     AND {lpred}) AND {opred}"
                ),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_queries_placed_for_cuda_return_exactly_the_rows_placed_for_cpu() {
    let count: usize = std::env::var("OXIDE_FUZZ_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let seed: u64 = std::env::var("OXIDE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let (dir, cuda) = tpch_lake(0.01).await;
    let cpu = OxideSession::local_with(
        PlacementTarget::Cpu,
        Arc::new(FixedProbe(BackendKind::CpuSimd)),
    );
    register_data_dir(&cpu, dir.path()).await.unwrap();
    for session in [&cpu, &cuda] {
        for sql in SETUP {
            session.sql(sql).await.unwrap();
        }
    }
    let resident = std::env::var("OXIDE_FUZZ_DEVICE_RESIDENT").is_ok_and(|v| v == "1");
    if resident {
        cuda.sql("SET oxidelake.execution.device_resident = true")
            .await
            .unwrap();
    }
    let tables = tables();
    let mut rng = Rng(seed);
    let (mut placed_filters, mut filters, mut rows) = (0, 0, 0);
    let (mut placed_joins, mut joins, mut kept_unswapped) = (0, 0, 0);
    let (mut placed_projections, mut projections) = (0, 0);
    for n in 0..count {
        let sql = query(&mut rng, &tables);
        let plan = cuda.physical_plan(&sql).await.unwrap();
        let (p, t) = PlacementCoverage::of(&plan, BackendKind::Cuda).get(OperatorFamily::Filter);
        placed_filters += p;
        filters += t;
        let coverage = PlacementCoverage::of(&plan, BackendKind::Cuda);
        let (p, t) = coverage.get(OperatorFamily::Join);
        placed_joins += p;
        joins += t;
        // Left semi, anti and outer joins that would build on their larger input run
        // swapped stay stock by design (eligibility/join.rs).
        kept_unswapped += coverage
            .reasons
            .iter()
            .filter(|((family, reason), _)| {
                *family == OperatorFamily::Join
                    && reason.contains("would build on its larger input")
            })
            .map(|(_, n)| n)
            .sum::<usize>();
        let (p, t) =
            PlacementCoverage::of(&plan, BackendKind::Cuda).get(OperatorFamily::Projection);
        placed_projections += p;
        projections += t;
        let want = sorted_rows(&cpu.sql(&sql).await.unwrap());
        let got = sorted_rows(&cuda.sql(&sql).await.unwrap());
        assert!(
            want == got,
            "seed {seed} query {n}: {sql}\n{} rows placed for cpu, {} placed for cuda; \
             first difference: {:?}",
            want.len(),
            got.len(),
            want.iter().zip(&got).find(|(a, b)| a != b)
        );
        rows += want.len();
    }
    println!(
        "fuzz: seed {seed}, {count} queries{}, {rows} rows, {placed_filters} of {filters} \
         filters, {placed_joins} of {joins} joins ({kept_unswapped} kept stock rather than \
         swapped onto their larger input) and {placed_projections} of {projections} computed \
         projections placed on GPU operators, no differences",
        if resident { " (device-resident)" } else { "" }
    );
    assert!(
        placed_projections * 10 >= projections * 9 && placed_projections > 0,
        "nearly every generated computed projection should be placed \
         ({placed_projections} of {projections})"
    );
    assert!(
        placed_joins * 10 >= (joins - kept_unswapped) * 9,
        "nearly every generated join not kept stock to avoid the swap should be placed \
         ({placed_joins} of {joins}, {kept_unswapped} kept stock)"
    );
    assert!(
        placed_filters * 2 > filters,
        "most generated filters should be placed ({placed_filters} of {filters})"
    );
}
