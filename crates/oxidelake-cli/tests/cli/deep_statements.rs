//! Long chains of operators and UNIONs get an answer or one error line, never a stack
//! overflow (issue 44: 2,000 terms aborted `oxide sql` with SIGABRT). datafusion-python
//! 55 answers 8,000 terms and 3,000 unions; `oxide sql` must too, and an 8,000-term OR
//! of comparisons.

use std::time::Duration;

use assert_cmd::Command;

/// `oxide sql -q --format csv -c SQL`, bounded against a hang. The bound is not a speed
/// target: a dev build plans deep trees slowly (DataFusion names each sub-expression by
/// formatting it, quadratic in the depth, with the standard library's debug checks on),
/// and the 8,000-term sum took 313 s alone on the thirtieth session's 2-core machine
/// (about 240 s on the machines before it).
fn oxide_sql(sql: &str) -> assert_cmd::assert::Assert {
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .env("HOME", "/nonexistent")
        .args(["sql", "-q", "--format", "csv", "-c", sql])
        .timeout(Duration::from_secs(900))
        .assert()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).to_string()
}

#[test]
fn an_expression_of_8000_terms_is_answered() {
    let sql = format!("SELECT 1{} AS n", "+1".repeat(7_999));
    let out = oxide_sql(&sql).success();
    assert_eq!(stdout(&out), "n\n8000\n");
}

#[test]
fn an_or_of_8000_comparisons_is_answered() {
    // 15,999 operators, but a tree 8,000 deep: the estimate counts the OR chain once
    // per OR and each comparison once inside it.
    let terms: Vec<String> = (1..=8_000).map(|i| format!("x = {i}")).collect();
    let sql = format!(
        "SELECT COUNT(*) AS n FROM (VALUES (1), (2), (8000), (9000)) AS t(x) WHERE {}",
        terms.join(" OR ")
    );
    let out = oxide_sql(&sql).success();
    assert_eq!(stdout(&out), "n\n3\n");
}

#[test]
fn a_query_of_3000_union_alls_is_answered() {
    let unions = vec!["SELECT 1 AS x"; 3_000].join(" UNION ALL ");
    let out = oxide_sql(&format!("SELECT COUNT(*) AS n FROM ({unions})")).success();
    assert_eq!(stdout(&out), "n\n3000\n");
}

#[test]
fn an_expression_past_the_depth_limit_is_refused_with_one_error_line() {
    let sql = format!("SELECT 1{}", "+1".repeat(20_000));
    let out = oxide_sql(&sql).failure().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: invalid statement:") && stderr.contains("at most 10000"),
        "{stderr}"
    );
}
