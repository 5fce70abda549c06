//! Differential fuzzer: random queries over the TPC-H schema (SF 0.01) and over
//! NULL-heavy tables derived from it — filters with comparisons, BETWEEN, IN, LIKE,
//! IS NULL, AND/OR/NOT over integers, decimals, dates and strings, joins (one key, two
//! keys with a string and NULLs, join filters, semi, anti and left outer joins) and
//! group-bys — and, every fourth query, over the edge tables (`edges`): the same shapes
//! over floats holding ±0.0, NaN and ±inf and over integers and decimals at the ends of
//! their types, whose SUMs and products overflow, and SUMs of a column holding both ends
//! of Int64, whose partitions' partial sums leave it while totals fit —
//! run placed for cpu and placed for cuda; every result must be identical, and a query
//! that fails must fail on both placements with an overflow error of the same class (the
//! checked SUM's, or another arithmetic overflow).
//!
//! The plans placed for cuda keep their GPU operators' batches on the device between
//! the transitions (ADR-0014, the only device path since issue #45); on the CPU backend
//! they stay host batches and the operators run their CPU paths.
//!
//! `OXIDE_FUZZ_QUERIES` (default 2000) and `OXIDE_FUZZ_SEED` (default 1) choose the run;
//! the longer run is in docs/placement-coverage.md. A failure prints the seed, the query
//! number and the SQL, so it can be replayed. The run's counts (`fuzz: ...`, and `fuzz value
//! classes: ...`, how many queries met each class) are also appended to the file
//! `OXIDE_CONFORMANCE_LOG` names, which `.ci/run` prints.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_planner::{FixedProbe, OperatorFamily, PlacementCoverage};
use oxidelake_runtime::cli::tables::register_data_dir;
use oxidelake_runtime::{OxideSession, PlacementTarget};

use super::data::{sorted_rows, tpch_lake};

mod edges;

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
    /// Float64 (Float32 where `real`) holding ±0.0, NaN and ±inf; its random literals are
    /// halves in `lo/2..=hi/2`.
    Float {
        real: bool,
    },
    /// Int64 or Int32 (`bits`) holding its type's extremes: arithmetic wraps.
    Extreme {
        bits: u8,
    },
    /// `DECIMAL(38, 0)` holding 38-digit values: arithmetic on it can overflow, an error.
    WideDecimal,
}

impl Kind {
    /// Any number.
    fn numeric(self) -> bool {
        self.never_fails() || matches!(self, Kind::WideDecimal)
    }

    /// A number whose arithmetic never fails: integers wrap (DataFusion's `+ - *` on
    /// integers do), floats reach ±inf and NaN, TPC-H's decimals stay far from 38 digits.
    /// Filters use only these: DataFusion evaluates the right side of an AND only on the
    /// rows the left side keeps, a GPU filter's operands on every row, so an operand that
    /// can fail would make the placements differ by when they fail, not by what they
    /// compute.
    fn never_fails(self) -> bool {
        matches!(
            self,
            Kind::Int | Kind::Decimal | Kind::Float { .. } | Kind::Extreme { .. }
        )
    }

    /// A number whose SUM of arithmetic is exact whatever order the rows come in:
    /// TPC-H's small integers and decimals, and halves (±inf and NaN absorb any order
    /// alike). Not the extremes: mixed with a float column they become doubles near
    /// 2^63, whose sums round differently in every order; and not the wide decimals,
    /// whose products can fail, which would add a second kind of error to the query's.
    fn exact_sums(self) -> bool {
        matches!(self, Kind::Int | Kind::Decimal | Kind::Float { .. })
    }
}

/// A column a predicate can use: its name, kind, the range its literals come from, and
/// the literals at its type's edges (a quarter of its literals, where it has them).
#[derive(Clone, Copy)]
struct Col {
    name: &'static str,
    kind: Kind,
    lo: i64,
    hi: i64,
    edges: &'static [&'static str],
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
    let c = |name, kind, lo, hi| Col {
        name,
        kind,
        lo,
        hi,
        edges: &[],
    };
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
    if !col.edges.is_empty() && rng.below(4) == 0 {
        return String::from(*rng.pick(col.edges));
    }
    let v = col.lo + rng.below((col.hi - col.lo + 1) as u64) as i64;
    match col.kind {
        Kind::Int | Kind::Extreme { .. } => v.to_string(),
        // A bare 12.34 is a Float64 in DataFusion's SQL; the cast makes it a decimal.
        Kind::Decimal => format!("CAST({}.{:02} AS DECIMAL(15, 2))", v / 100, v % 100),
        Kind::WideDecimal => format!("CAST({v} AS DECIMAL(38, 0))"),
        Kind::Float { real } => {
            let half = format!("{:.1}", v as f64 / 2.0);
            if real && rng.below(2) == 0 {
                format!("CAST({half} AS REAL)")
            } else {
                half
            }
        }
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
        (4, kind) if kind.numeric() || matches!(kind, Kind::Date) => {
            let (a, b) = (literal(rng, col), literal(rng, col));
            format!("{} BETWEEN {a} AND {b}", col.name)
        }
        // Arithmetic on one side: the filter compares a computed column.
        (5, kind) if kind.never_fails() => {
            let other = numeric(rng, cols, Kind::never_fails);
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

/// A random column of `cols` whose kind is one `keep` takes (every table has an Int one;
/// on TPC-H's tables each of [`Kind::numeric`], [`Kind::never_fails`] and
/// [`Kind::exact_sums`] takes exactly the Int and Decimal columns).
fn numeric<'a>(rng: &mut Rng, cols: &'a [Col], keep: fn(Kind) -> bool) -> &'a Col {
    let numbers: Vec<&Col> = cols.iter().filter(|c| keep(c.kind)).collect();
    numbers[rng.below(numbers.len() as u64) as usize]
}

/// An arithmetic expression over the numeric columns `keep` takes: integers wrap,
/// decimals are exact (or fail with an overflow), mixed ones are cast to decimals, floats
/// are IEEE's (placed on a GPU projection where the device has the types).
fn arithmetic(rng: &mut Rng, cols: &[Col], keep: fn(Kind) -> bool) -> String {
    let (a, b) = (numeric(rng, cols, keep).name, numeric(rng, cols, keep).name);
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

/// What a generated query does (only an aggregate can fail with SUM's overflow).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Select,
    Projection,
    Aggregate,
    Join,
}

/// A generated query.
struct Query {
    sql: String,
    shape: Shape,
}

fn query(rng: &mut Rng, tables: &[Table]) -> Query {
    let t = rng.pick(tables);
    let pred = predicate(rng, &t.cols, 3);
    match rng.below(5) {
        3 => tpch_join(rng, tables),
        shape => one_table(rng, t, &pred, shape),
    }
}

/// A query of the edge tables: the shapes of [`query`], with their joins, and SUMs of
/// the mixed-sign `im` ([`edges::mixed_sum`]).
fn edge_query(rng: &mut Rng, t: &Table) -> Query {
    let pred = predicate(rng, &t.cols, 3);
    match rng.below(6) {
        3 => edges::join(rng, &pred),
        5 => edges::mixed_sum(rng, &pred),
        shape => one_table(rng, t, &pred, shape),
    }
}

/// A query of `t` alone, rows filtered by `pred`: its columns (`shape` 0 or 1), two
/// arithmetic expressions (4), or a group-by (2).
fn one_table(rng: &mut Rng, t: &Table, pred: &str, shape: u64) -> Query {
    let names: Vec<&str> = t.cols.iter().map(|c| c.name).collect();
    match shape {
        0 | 1 => Query {
            sql: format!("SELECT {} FROM {} WHERE {pred}", names.join(", "), t.name),
            shape: Shape::Select,
        },
        4 => Query {
            sql: format!(
                "SELECT {}, {} AS x, {} AS y FROM {} WHERE {pred}",
                t.key,
                arithmetic(rng, &t.cols, Kind::numeric),
                arithmetic(rng, &t.cols, Kind::numeric),
                t.name
            ),
            shape: Shape::Projection,
        },
        _ => aggregate(rng, t, pred),
    }
}

/// One to three keys (or none), string and float keys included; COUNT(*) and, per
/// column kind, the aggregates that mean something for it.
fn aggregate(rng: &mut Rng, t: &Table, pred: &str) -> Query {
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
    match col.kind {
        Kind::Int | Kind::Decimal | Kind::Float { .. } => {
            aggs.push(format!("SUM({c})"));
            aggs.push(format!("AVG({c})"));
        }
        // Whether a SUM of `ip`, `ineg`, `im`, `dp` or `dn` overflows depends on its total
        // only, however the rows are partitioned (`im`'s partial sums leave Int64 where
        // its totals fit; `h`'s SUM is an Int64, out of reach of Int32 values); half the
        // time, so that the query's other aggregates are compared too where it does. No
        // AVG over the Int64 extremes: DataFusion averages integers in f64, whose
        // rounding then depends on the order of the rows.
        Kind::Extreme { bits } => {
            if rng.below(2) == 0 {
                aggs.push(format!("SUM({c})"));
            }
            if bits == 32 {
                aggs.push(format!("AVG({c})"));
            }
        }
        // SUM or AVG, not both: AVG of a total that SUM holds can still overflow (its
        // scale is 4 digits wider), and where the two fail in groups of different
        // partitions, which error a query reports would depend on which partition fails
        // first, and the placements could differ in the error's class.
        Kind::WideDecimal => match rng.below(3) {
            0 => aggs.push(format!("SUM({c})")),
            1 => aggs.push(format!("AVG({c})")),
            _ => {}
        },
        Kind::Date | Kind::Text(_) => {}
    }
    aggs.push(format!(
        "SUM({})",
        arithmetic(rng, &t.cols, Kind::exact_sums)
    ));
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
    Query {
        sql: format!(
            "SELECT {} FROM {} WHERE {pred}{group_by}",
            select.join(", "),
            t.name
        ),
        shape: Shape::Aggregate,
    }
}

/// A join of TPC-H's tables (`li`, `ord`, `lnull`).
fn tpch_join(rng: &mut Rng, tables: &[Table]) -> Query {
    let lpred = predicate(rng, &tables[0].cols, 2);
    let opred = predicate(rng, &tables[1].cols, 2);
    let k = rng.below(5);
    let sql = match rng.below(6) {
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
    };
    Query {
        sql,
        shape: Shape::Join,
    }
}

/// The classes of error a query may fail with, on both placements alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// OxideLake's checked SUM: `Arithmetic overflow: SUM over <type> exceeds its range`.
    Sum,
    /// Any other arithmetic overflow: DataFusion's checked decimal arithmetic, AVG's
    /// decimal result.
    Arithmetic,
}

/// The overflow class of `err`; `None` for an error that is no overflow.
fn overflow_class(err: &EngineError) -> Option<Overflow> {
    let text = err.to_string();
    if text.contains("Arithmetic overflow: SUM over") && text.contains("exceeds its range") {
        Some(Overflow::Sum)
    } else if text.to_lowercase().contains("overflow") {
        Some(Overflow::Arithmetic)
    } else {
        None
    }
}

/// A query's outcome on one placement, for a failure message.
fn outcome(result: &Result<Vec<RecordBatch>, EngineError>) -> String {
    match result {
        Ok(batches) => format!("{} rows", sorted_rows(batches).len()),
        Err(e) => format!("error: {e}"),
    }
}

/// Prints `line`, and appends it to the file `OXIDE_CONFORMANCE_LOG` names: `.ci/run`
/// prints that file after its test step, which shows no output of passing tests.
fn report(line: &str) {
    println!("{line}");
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

/// Below this many queries of the edge tables a run does not require every value class
/// to have come up (`OXIDE_FUZZ_QUERIES=1000` gives 250).
const EDGE_QUERIES_FOR_EVERY_CLASS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_queries_placed_for_cuda_return_the_rows_or_overflow_errors_placed_for_cpu() {
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
        edges::register(session);
    }
    let tables = tables();
    let edge_table = edges::table();
    // The TPC-H queries are the sequence they were before the edge tables came (fewer
    // of them); the edge queries draw from their own generator.
    let mut rng = Rng(seed);
    let mut edge_rng = Rng(seed ^ 0xED6E_0000_0000_0044);
    let (mut placed_filters, mut filters, mut rows) = (0, 0, 0);
    let (mut placed_joins, mut joins, mut kept_unswapped) = (0, 0, 0);
    let (mut placed_projections, mut projections) = (0, 0);
    let mut edge_coverage = PlacementCoverage::default();
    let (mut edge_queries, mut in_results, mut as_literals) = (
        0,
        edges::ClassCounts::default(),
        edges::ClassCounts::default(),
    );
    let (mut sum_overflows, mut arithmetic_overflows) = (0, 0);
    for n in 0..count {
        let on_edges = n % 4 == 3;
        let q = if on_edges {
            edge_query(&mut edge_rng, &edge_table)
        } else {
            query(&mut rng, &tables)
        };
        let sql = q.sql.as_str();
        // A plan that fails here fails to run below, where both placements must agree.
        if let Ok(plan) = cuda.physical_plan(sql).await {
            let coverage = PlacementCoverage::of(&plan, BackendKind::Cuda);
            if on_edges {
                edge_coverage.add(&coverage);
            } else {
                let (p, t) = coverage.get(OperatorFamily::Filter);
                placed_filters += p;
                filters += t;
                let (p, t) = coverage.get(OperatorFamily::Join);
                placed_joins += p;
                joins += t;
                // Left semi, anti and outer joins that would build on their larger input
                // run swapped stay stock by design (eligibility/join.rs).
                kept_unswapped += coverage
                    .reasons
                    .iter()
                    .filter(|((family, reason), _)| {
                        *family == OperatorFamily::Join
                            && reason.contains("would build on its larger input")
                    })
                    .map(|(_, n)| n)
                    .sum::<usize>();
                let (p, t) = coverage.get(OperatorFamily::Projection);
                placed_projections += p;
                projections += t;
            }
        }
        if on_edges {
            edge_queries += 1;
            as_literals.add_presence(&edges::literal_classes(sql));
        }
        let want = cpu.sql(sql).await;
        let got = cuda.sql(sql).await;
        match (&want, &got) {
            (Ok(want), Ok(got)) => {
                let (want_rows, got_rows) = (sorted_rows(want), sorted_rows(got));
                assert!(
                    want_rows == got_rows,
                    "seed {seed} query {n}: {sql}\n{} rows placed for cpu, {} placed for cuda; \
                     first difference: {:?}",
                    want_rows.len(),
                    got_rows.len(),
                    want_rows.iter().zip(&got_rows).find(|(a, b)| a != b)
                );
                rows += want_rows.len();
                if on_edges {
                    in_results.add_presence(&edges::cells_by_class(want));
                }
            }
            (Err(w), Err(g))
                if overflow_class(w).is_some() && overflow_class(w) == overflow_class(g) =>
            {
                match overflow_class(w) {
                    Some(Overflow::Sum) => {
                        assert!(
                            q.shape == Shape::Aggregate,
                            "seed {seed} query {n}: {sql}\nSUM's overflow from a query \
                             without an aggregate: {w}"
                        );
                        sum_overflows += 1;
                    }
                    _ => arithmetic_overflows += 1,
                }
            }
            _ => panic!(
                "seed {seed} query {n}: {sql}\nplaced for cpu: {}\nplaced for cuda: {}\n\
                 (a query may fail only with an overflow error, and then on both placements \
                 with one of the same class: SUM's or another arithmetic overflow)",
                outcome(&want),
                outcome(&got)
            ),
        }
    }
    report(&format!(
        "fuzz: seed {seed}, {count} queries, {rows} rows, {placed_filters} of {filters} \
         filters, {placed_joins} of {joins} joins ({kept_unswapped} kept stock rather than \
         swapped onto their larger input) and {placed_projections} of {projections} computed \
         projections of the TPC-H queries placed on GPU operators, the edge queries' {}, \
         no differences",
        edge_coverage.summary()
    ));
    report(&format!(
        "fuzz value classes: seed {seed}, {edge_queries} queries of the edge tables; \
         queries with the class in their result: {}; with it as a literal: {}; \
         queries that failed with an overflow error on both placements: \
         sum_overflow={sum_overflows} arithmetic_overflow={arithmetic_overflows}",
        in_results.describe(),
        as_literals.describe()
    ));
    report(&format!(
        "fuzz edge table cells: {} rows, {}",
        edges::ROWS,
        edges::cells_by_class(&edges::edges_partitions().concat()).describe()
    ));
    if edge_queries >= EDGE_QUERIES_FOR_EVERY_CLASS {
        let (results, literals) = (in_results.missing(), as_literals.missing());
        assert!(
            results.is_empty() && literals.is_empty(),
            "{edge_queries} edge queries, yet no result held {results:?} and no literal was \
             {literals:?}: the generator no longer reaches every value class"
        );
    }
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
