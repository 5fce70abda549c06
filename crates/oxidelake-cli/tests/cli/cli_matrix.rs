//! `oxide sql` as datafusion-cli and duckdb users expect it, one test per behaviour:
//! discovery (information schema, SHOW, URL tables, `\d`), the flags (`-c`, `-f`, `-q`,
//! `--maxrows`, `--format`), statement splitting and EXPLAIN through DataFusion's
//! parser, errors in scripts, Ctrl-C, and `OXIDE_BACKEND`.

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;

fn oxide() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oxide"));
    // No ~/.oxiderc of the machine's user, no forced backend.
    command
        .env("HOME", "/nonexistent")
        .env_remove("OXIDE_BACKEND");
    command
}

/// A 1,000-row synthetic lake in a fresh directory (`t/part-0.parquet`).
fn lake() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    oxide()
        .args(["gen-data", "--rows", "1000", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    dir
}

/// `oxide sql --data DIR ARGS…` run to success: (stdout, stderr).
fn sql(dir: &Path, args: &[&str]) -> (String, String) {
    let out = oxide()
        .current_dir(dir)
        .args(["sql", "--data"])
        .arg(dir)
        .args(args)
        .assert()
        .success();
    let output = out.get_output();
    (
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn show_tables_and_show_columns_answer_from_the_information_schema() {
    let dir = lake();
    let (out, _) = sql(dir.path(), &["--format", "csv", "-c", "SHOW TABLES"]);
    assert!(out.contains("datafusion,public,t,BASE TABLE"), "{out}");
    let (out, _) = sql(
        dir.path(),
        &["--format", "csv", "-c", "SHOW COLUMNS FROM t"],
    );
    for column in ["id,Int64", "k,Int64", "v,Int64", "x,Float64"] {
        assert!(out.contains(column), "{column}: {out}");
    }
}

#[test]
fn the_placement_target_set_in_sql_reads_back_with_show() {
    let dir = lake();
    let (out, _) = sql(
        dir.path(),
        &[
            "--format",
            "csv",
            "-c",
            "SET oxidelake.placement.target = 'cuda'; SHOW oxidelake.placement.target",
        ],
    );
    assert_eq!(out, "name,value\noxidelake.placement.target,cuda\n");
}

#[test]
fn a_parquet_file_path_is_a_table_in_from() {
    let dir = lake();
    let (out, _) = sql(
        dir.path(),
        &[
            "--format",
            "csv",
            "-c",
            "SELECT COUNT(*) AS n FROM 't/part-0.parquet'",
        ],
    );
    assert_eq!(out, "n\n1000\n");
}

#[test]
fn backslash_d_lists_tables_and_describes_one() {
    let dir = lake();
    let (out, _) = sql(dir.path(), &["--format", "csv", "-c", "\\d"]);
    assert_eq!(
        out,
        "table_schema,table_name,table_type\npublic,t,BASE TABLE\n"
    );
    let (out, _) = sql(dir.path(), &["--format", "csv", "-c", "\\d t"]);
    assert!(
        out.starts_with("column_name,data_type,is_nullable\nid,Int64,NO\n"),
        "{out}"
    );
}

#[test]
fn duckdb_dot_commands_list_describe_and_switch_the_mode() {
    let dir = lake();
    let script = ".tables\n.schema t\n.mode ndjson\nSELECT k FROM t ORDER BY id LIMIT 2;\n";
    let out = oxide()
        .args(["sql", "--format", "csv", "--data"])
        .arg(dir.path())
        .write_stdin(script)
        .assert()
        .success();
    let out = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        out.starts_with("table_schema,table_name,table_type\npublic,t,BASE TABLE\n"),
        "{out}"
    );
    assert!(
        out.contains("column_name,data_type,is_nullable\nid,Int64,NO"),
        "{out}"
    );
    assert!(out.ends_with("{\"k\":0}\n{\"k\":1}\n"), "{out}");
}

#[test]
fn timing_toggles_the_elapsed_time_on_the_row_count_line() {
    let dir = lake();
    let (_, err) = sql(dir.path(), &["-c", "SELECT 1; \\timing", "-c", "SELECT 2"]);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("fetched")).collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].contains("Elapsed"), "{err}");
    assert_eq!(lines[1], "1 row fetched.", "{err}");
}

#[test]
fn help_lists_the_commands() {
    let dir = lake();
    let (out, _) = sql(dir.path(), &["-c", "\\?"]);
    for command in ["\\d", ".tables", ".mode", "\\timing", "\\q"] {
        assert!(out.contains(command), "{command}: {out}");
    }
}

#[test]
fn repeated_c_flags_run_every_statement_in_order() {
    let dir = lake();
    let (out, _) = sql(
        dir.path(),
        &[
            "--format",
            "csv",
            "-c",
            "SELECT 1 AS a; SELECT 2 AS b",
            "-c",
            "SELECT 3 AS c",
        ],
    );
    assert_eq!(out, "a\n1\nb\n2\nc\n3\n");
}

#[test]
fn f_runs_the_statements_of_each_file_after_the_c_ones() {
    let dir = lake();
    std::fs::write(
        dir.path().join("one.sql"),
        "-- first file\nSELECT 10 AS x;\nSELECT 11 AS y\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("two.sql"), "SELECT COUNT(*) AS n\nFROM t;").unwrap();
    let (out, _) = sql(
        dir.path(),
        &[
            "--format",
            "csv",
            "-f",
            "one.sql",
            "-f",
            "two.sql",
            "-c",
            "SELECT 0 AS c",
        ],
    );
    assert_eq!(out, "c\n0\nx\n10\ny\n11\nn\n1000\n");
}

#[test]
fn quiet_prints_the_result_and_nothing_else() {
    let dir = lake();
    let (out, err) = sql(
        dir.path(),
        &["-q", "--format", "csv", "-c", "SELECT 1 AS a"],
    );
    assert_eq!(out, "a\n1\n");
    assert_eq!(err, "");
}

#[test]
fn maxrows_limits_the_table_and_says_how_many_rows_there_were() {
    let dir = lake();
    let (out, err) = sql(
        dir.path(),
        &["--maxrows", "3", "-c", "SELECT id FROM t ORDER BY id"],
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("| ")).count(),
        4,
        "header + 3: {out}"
    );
    assert!(
        err.contains("1000 rows fetched. (First 3 displayed."),
        "{err}"
    );
    let (out, _) = sql(
        dir.path(),
        &["--maxrows", "inf", "-c", "SELECT id FROM t ORDER BY id"],
    );
    assert_eq!(out.lines().filter(|l| l.starts_with("| ")).count(), 1001);
}

#[test]
fn the_default_table_stops_at_forty_rows() {
    let dir = lake();
    let (out, err) = sql(dir.path(), &["-c", "SELECT id FROM t"]);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("| ")).count(),
        41,
        "{out}"
    );
    assert!(err.contains("(First 40 displayed."), "{err}");
}

#[test]
fn every_format_prints_the_same_rows() {
    let dir = lake();
    let query =
        "SELECT k, CASE WHEN id = 1 THEN NULL ELSE 'a|b' END AS s FROM t ORDER BY id LIMIT 2";
    let cases = [
        ("csv", "k,s\n0,a|b\n1,\n"),
        ("tsv", "k\ts\n0\ta|b\n1\t\n"),
        ("json", "[{\"k\":0,\"s\":\"a|b\"},{\"k\":1,\"s\":null}]\n"),
        ("ndjson", "{\"k\":0,\"s\":\"a|b\"}\n{\"k\":1,\"s\":null}\n"),
        (
            "markdown",
            "| k | s |\n|---|---|\n| 0 | a\\|b |\n| 1 | NULL |\n",
        ),
        // Not a terminal: CSV.
        ("automatic", "k,s\n0,a|b\n1,\n"),
    ];
    for (format, expected) in cases {
        let (out, _) = sql(dir.path(), &["--format", format, "-c", query]);
        assert_eq!(out, expected, "{format}");
    }
}

#[test]
fn the_table_shows_null_as_null() {
    let dir = lake();
    let (out, _) = sql(dir.path(), &["-c", "SELECT CAST(NULL AS INT) AS n"]);
    assert!(out.contains("| NULL |"), "{out}");
}

#[test]
fn an_empty_result_prints_its_header_and_zero_rows() {
    let dir = lake();
    let (out, err) = sql(dir.path(), &["-c", "SELECT id, k FROM t WHERE id < 0"]);
    assert!(out.contains("| id | k |"), "{out}");
    assert!(err.starts_with("0 rows fetched."), "{err}");
    let (out, _) = sql(
        dir.path(),
        &["--format", "csv", "-c", "SELECT id, k FROM t WHERE id < 0"],
    );
    assert_eq!(out, "id,k\n");
}

#[test]
fn a_semicolon_in_a_block_comment_does_not_end_the_statement() {
    let dir = lake();
    let (out, _) = sql(
        dir.path(),
        &[
            "--format",
            "csv",
            "-c",
            "SELECT /* a; b */ 1 AS one; SELECT 2 AS two",
        ],
    );
    assert_eq!(out, "one\n1\ntwo\n2\n");
}

#[test]
fn explain_analyze_in_parentheses_runs_the_query_with_metrics() {
    let dir = lake();
    let (out, _) = sql(
        dir.path(),
        &[
            "--maxrows",
            "inf",
            "-c",
            "EXPLAIN (ANALYZE) SELECT SUM(v) FROM t",
        ],
    );
    assert!(out.contains("Plan with Metrics"), "{out}");
    assert!(out.contains("output_rows="), "{out}");
}

#[test]
fn plain_explain_shows_placement_whatever_the_spacing() {
    let dir = lake();
    let (out, _) = sql(
        dir.path(),
        &[
            "--maxrows",
            "inf",
            "--placement",
            "cuda",
            "-c",
            "/* why */ EXPLAIN\n  SELECT k, SUM(v) FROM t WHERE v < 10 GROUP BY k",
        ],
    );
    // Our plan (one physical_plan row with placement), not DataFusion's EXPLAIN, whose
    // logical_plan row would show the text was not recognised as a plain EXPLAIN.
    assert!(
        out.contains("[cuda]") && out.contains("physical_plan"),
        "{out}"
    );
    assert!(!out.contains("logical_plan"), "{out}");
}

#[test]
fn a_piped_script_stops_at_the_first_error_with_status_one() {
    let out = oxide()
        .args(["sql", "--format", "csv"])
        .write_stdin("SELECT 1 AS a;\nSELEC 2;\nSELECT 3 AS c;\n")
        .assert()
        .failure()
        .code(1);
    let output = out.get_output();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "a\n1\n");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.lines().last().unwrap().starts_with("error: "), "{err}");
}

#[test]
fn continue_on_error_runs_the_rest_and_still_fails() {
    let out = oxide()
        .args(["sql", "--format", "csv", "--continue-on-error"])
        .write_stdin("SELECT 1 AS a;\nSELEC 2;\nSELECT 3 AS c;\n")
        .assert()
        .failure()
        .code(1);
    let output = out.get_output();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "a\n1\nc\n3\n");
    assert!(String::from_utf8_lossy(&output.stderr).contains("error: "));
}

#[test]
fn sigint_cancels_a_running_statement_and_exits_130() {
    // Counting 10^12 generated rows runs far longer than this test.
    let child = StdCommand::new(env!("CARGO_BIN_EXE_oxide"))
        .env("HOME", "/nonexistent")
        .args([
            "sql",
            "-c",
            "SELECT COUNT(*) FROM generate_series(1, 1000000000000)",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let status = StdCommand::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let output = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cancelled in {:?}",
        started.elapsed()
    );
    assert_eq!(output.status.code(), Some(130));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("Query cancelled."), "{err}");
}

#[test]
fn oxiderc_runs_before_the_prompt_but_not_with_c() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".oxiderc"),
        "SET oxidelake.placement.target = 'cpu';\n.mode ndjson\n",
    )
    .unwrap();
    let piped = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
            .env("HOME", home.path())
            .arg("sql")
            .args(args)
            .write_stdin("SHOW oxidelake.placement.target;\n")
            .assert()
            .success();
        String::from_utf8_lossy(&out.get_output().stdout).to_string()
    };
    // The rc file's SET and its .mode both hold for the statements that follow...
    assert_eq!(
        piped(&[]),
        "{\"name\":\"oxidelake.placement.target\",\"value\":\"cpu\"}\n"
    );
    // ...and an explicit --format wins over its .mode.
    assert_eq!(
        piped(&["--format", "csv"]),
        "name,value\noxidelake.placement.target,cpu\n"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .env("HOME", home.path())
        .args([
            "sql",
            "--format",
            "csv",
            "-c",
            "SHOW oxidelake.placement.target",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(text, "name,value\noxidelake.placement.target,auto\n");
}

#[test]
fn an_unavailable_forced_backend_is_a_startup_error_naming_why() {
    // CUDA cannot start without the `cuda` feature or without a device (a machine
    // with one, and a build with the feature, has nothing unavailable to force).
    if oxidelake_device::probe_cuda().devices() > 0 {
        eprintln!("skipped: this machine has a CUDA device, so forcing CUDA starts");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .env("HOME", "/nonexistent")
        .env("OXIDE_BACKEND", "cuda")
        .args(["sql", "-c", "SELECT 1"])
        .assert()
        .failure()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ")
            && err
                .split_once("backend cuda is not available: ")
                .is_some_and(|(_, why)| !why.trim().is_empty()),
        "{err}"
    );
    assert!(
        out.get_output().stdout.is_empty(),
        "no result after a startup error"
    );
}

#[test]
fn a_usage_error_is_one_line_and_status_one() {
    for (args, expected) in [
        (vec!["sql", "--no-such-flag"], "--no-such-flag"),
        // A missing argument's name is on clap's second line: it stays in the one line.
        (vec!["explain"], "--command"),
        // The statement used to follow -q; -q is --quiet now, as in datafusion-cli.
        (vec!["sql", "-q", "SELECT 1"], "the statement goes in -c"),
    ] {
        let out = oxide().args(&args).assert().failure().code(1);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{args:?}: {err}"
        );
    }
}
