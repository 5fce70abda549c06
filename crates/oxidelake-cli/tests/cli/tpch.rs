//! TPC-H through the `oxide` command line: all 22 queries complete at SF 0.1, and at
//! SF 1 the answers of seven of them, placed for this machine and for CUDA, equal the
//! reference answers tpchgen ships (from the TPC-H tools' dbgen/qgen).

use std::time::Duration;

use assert_cmd::Command;
use oxidelake_runtime::cli::tpch::tpch_query;

fn oxide() -> Command {
    Command::new(env!("CARGO_BIN_EXE_oxide"))
}

fn script(queries: &[i32], scale_factor: f64) -> String {
    let mut text = String::new();
    for q in queries {
        for statement in tpch_query(*q, scale_factor).unwrap() {
            text.push_str(&statement);
            text.push_str(";\n");
        }
    }
    text
}

#[test]
fn all_22_tpch_queries_complete_at_scale_factor_0_1() {
    let dir = crate::generated::tpch_data(0.1);
    let queries: Vec<i32> = (1..=22).collect();
    let out = oxide()
        .args(["sql", "--format", "csv", "--data"])
        .arg(dir.path())
        .write_stdin(script(&queries, 0.1))
        .timeout(Duration::from_secs(900))
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    // One "fetched" line per statement: 22 queries, Q15 being three statements.
    assert_eq!(stderr.matches("fetched. Elapsed").count(), 24, "{stderr}");
}

/// Parses a reference answer (`a|b|c` rows after a header) into rows of trimmed cells.
fn reference(query: i32) -> Vec<Vec<String>> {
    let answer = tpchgen::q_and_a::answers_sf1::answer(query).unwrap();
    answer
        .lines()
        .filter(|l| !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

fn cells_equal(ours: &str, theirs: &str) -> bool {
    match (ours.parse::<f64>(), theirs.parse::<f64>()) {
        (Ok(a), Ok(b)) => (a - b).abs() <= 0.01 + b.abs() * 1e-9,
        _ => ours.trim() == theirs.trim(),
    }
}

/// Splits one CSV line (RFC 4180 quoting).
fn csv_cells(line: &str) -> Vec<String> {
    let (mut cells, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            (c, _) => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[test]
fn tpch_answers_at_scale_factor_1_equal_the_reference_answers() {
    let dir = crate::generated::tpch_data(1.0);
    // Placed for this machine, and placed for CUDA (the GPU operators' CPU paths here).
    for (query, placement) in [1, 3, 5, 6, 10, 12, 14]
        .into_iter()
        .flat_map(|q| [(q, "auto"), (q, "cuda")])
    {
        let out = oxide()
            .args(["sql", "--placement", placement, "--format", "csv", "--data"])
            .arg(dir.path())
            .write_stdin(script(&[query], 1.0))
            .timeout(Duration::from_secs(600))
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        let ours: Vec<Vec<String>> = stdout.lines().skip(1).map(csv_cells).collect();
        let theirs = reference(query);
        assert_eq!(ours.len(), theirs.len(), "Q{query} row count\n{stdout}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a.len(), b.len(), "Q{query}: {a:?} vs {b:?}");
            assert!(
                a.iter().zip(b).all(|(x, y)| cells_equal(x, y)),
                "Q{query}: {a:?} vs reference {b:?}"
            );
        }
        println!(
            "tpch: Q{query} placed {placement} equals the SF 1 reference answer ({} rows)",
            ours.len()
        );
    }
    // The CUDA placement really puts GPU operators into these plans.
    for query in [3, 12] {
        let statement = tpch_query(query, 1.0).unwrap().remove(0);
        let out = oxide()
            .args(["explain", "--placement", "cuda", "--data"])
            .arg(dir.path())
            .args(["-c", &statement])
            .assert()
            .success();
        let plan = String::from_utf8_lossy(&out.get_output().stdout).to_string();
        assert!(plan.contains("[cuda]"), "Q{query}:\n{plan}");
    }
}

#[test]
fn gen_data_writes_the_22_queries_that_oxide_sql_runs_from_files() {
    let data = crate::generated::tpch_data(0.1);
    let queries = tempfile::tempdir().unwrap();
    // --queries without --out writes the queries only.
    oxide()
        .args(["gen-data", "--tpch", "--scale-factor", "0.1", "--queries"])
        .arg(queries.path())
        .assert()
        .success();
    let mut names: Vec<String> = std::fs::read_dir(queries.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 22, "{names:?}");
    assert_eq!(
        (names[0].as_str(), names[21].as_str()),
        ("q01.sql", "q22.sql")
    );
    // Q15 (three statements) and Q6 run from their files; Q6's revenue is one row.
    let out = oxide()
        .args(["sql", "--format", "csv", "-q", "--data"])
        .arg(data.path())
        .arg("-f")
        .arg(queries.path().join("q15.sql"))
        .arg("-f")
        .arg(queries.path().join("q06.sql"))
        .timeout(Duration::from_secs(300))
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.contains("s_suppkey"),
        "Q15's header is missing: {stdout}"
    );
    assert!(
        stdout.lines().any(|l| l == "revenue"),
        "Q6's header is missing: {stdout}"
    );
}
