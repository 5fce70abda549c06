//! The `oxide` command line end to end: generated data, SQL checked against an
//! independent computation, the same SQL on a scheduler and a worker started as
//! processes, EXPLAIN with placement, and errors that read like a tool's.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;

use super::local_cluster::{LocalCluster, free_port};

const ROWS: i64 = 1_000_000;
const QUERY: &str = "SELECT k, SUM(v) FROM t GROUP BY k ORDER BY k";

fn oxide() -> Command {
    Command::new(env!("CARGO_BIN_EXE_oxide"))
}

/// SUM(v) per k computed straight from the generator's definition of the rows
/// (k = id mod 64, v = id * 7919 mod 1000), without the engine.
fn expected_sums() -> BTreeMap<i64, i64> {
    let mut sums = BTreeMap::new();
    for id in 0..ROWS {
        *sums.entry(id % 64).or_insert(0) += (id * 7_919) % 1_000;
    }
    sums
}

fn parse_csv(stdout: &[u8]) -> BTreeMap<i64, i64> {
    let text = String::from_utf8_lossy(stdout);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("k,sum(t.v)"), "{text}");
    lines
        .map(|l| {
            let (k, s) = l.split_once(',').unwrap();
            (k.parse().unwrap(), s.parse().unwrap())
        })
        .collect()
}

/// `oxide sql --format csv --data DIR EXTRA… -c QUERY`, which must succeed: its stdout
/// and stderr.
fn sql_csv(dir: &Path, extra: &[&str], query: &str) -> (String, String) {
    let out = oxide()
        .args(["sql", "--format", "csv", "--data"])
        .arg(dir)
        .args(extra)
        .args(["-c", query])
        .assert()
        .success();
    let output = out.get_output();
    (
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// The 1 M-row table `t`, generated once for the tests of this binary (read-only).
fn lake() -> crate::generated::GeneratedData {
    crate::generated::synthetic_data(ROWS as u64)
}

#[test]
fn discovery_and_url_tables_work_on_a_cluster_as_embedded() {
    let dir = lake();
    let cluster = LocalCluster::start("cuda");
    let file = dir.path().join("t/part-0.parquet");
    let out = oxide()
        .args([
            "sql",
            "--format",
            "csv",
            "--cluster",
            &cluster.url(),
            "--data",
        ])
        .arg(dir.path())
        .args(["-c", "SHOW TABLES", "-c", "\\d t"])
        .args(["-c", "SHOW oxidelake.placement.target"])
        .arg("-c")
        .arg(format!("SELECT COUNT(*) AS n FROM '{}'", file.display()))
        .args(["-c", "SELECT COUNT(*) AS n FROM t"])
        .timeout(Duration::from_secs(120))
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    // SHOW TABLES and \d answer from the client's catalog; the counts of the URL table
    // and of t (still registered after them) come from the cluster.
    assert!(
        stdout.contains("datafusion,public,t,BASE TABLE"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("k,Int64")), "{stdout}");
    assert!(stdout.contains("oxidelake.placement.target"), "{stdout}");
    let counts = stdout.lines().filter(|l| *l == ROWS.to_string()).count();
    assert_eq!(counts, 2, "{stdout}");
    drop(cluster);
}

#[test]
fn generated_data_gives_correct_sums_embedded_and_on_a_scheduler_with_a_worker() {
    let dir = lake();
    let expected = expected_sums();

    let embedded = oxide()
        .args(["sql", "--format", "csv", "--data"])
        .arg(dir.path())
        .args(["-c", QUERY])
        .assert()
        .success();
    let output = embedded.get_output();
    assert_eq!(parse_csv(&output.stdout), expected);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("64 rows fetched. Elapsed"), "{stderr}");

    // The same query on a cluster of real processes.
    let cluster = LocalCluster::start("cuda");
    let url = cluster.url();
    let clustered = oxide()
        .args(["sql", "--format", "csv", "--cluster", &url, "--data"])
        .arg(dir.path())
        .args(["-c", QUERY])
        .timeout(Duration::from_secs(120))
        .assert()
        .success();
    assert_eq!(parse_csv(&clustered.get_output().stdout), expected);
    drop(cluster);
}

#[test]
fn device_limit_runs_a_gpu_placed_join_in_parts_with_the_same_answer() {
    let dir = lake();
    let query = "SELECT COUNT(*), SUM(a.v) FROM t a JOIN t b ON a.id = b.id";
    let out = oxide()
        .args([
            "explain",
            "--placement",
            "cuda",
            "--device-limit",
            "8M",
            "--data",
        ])
        .arg(dir.path())
        .args(["-c", query])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        text.contains("pairs=GpuHashJoinExec[cuda], device_limit=8388608"),
        "{text}"
    );
    let (limited, note) = sql_csv(
        dir.path(),
        &["--placement", "cuda", "--device-limit", "8M"],
        query,
    );
    let sum: i64 = (0..ROWS).map(|id| (id * 7_919) % 1_000).sum();
    assert!(limited.contains(&format!("{ROWS},{sum}")), "{limited}");
    // No memory limit: the parts of the split build sides waited in host memory.
    assert!(
        note.contains("of joins split for the device limit in host memory"),
        "the build sides were split: {note}"
    );
    assert!(!note.contains("Spilled"), "{note}");
    let out = oxide()
        .args([
            "sql",
            "--cluster",
            "df://127.0.0.1:1",
            "--device-limit",
            "8M",
            "-c",
            "SELECT 1",
        ])
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("device limit applies to embedded sessions"),
        "{err}"
    );
}

#[test]
fn explain_shows_placement_tags_and_cpu_reasons() {
    let dir = tempfile::tempdir().unwrap();
    oxide()
        .args(["gen-data", "--rows", "10000", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let out = oxide()
        .args(["explain", "--placement", "cuda", "--data"])
        .arg(dir.path())
        .args(["-c", "SELECT k, SUM(v) FROM t WHERE v < 10 GROUP BY k"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("GpuPartialAggregateExec[cuda]"), "{text}");
    assert!(text.contains("GpuFilterExec[cuda]"), "{text}");
    let out = oxide()
        .args(["explain", "--placement", "cuda", "--data"])
        .arg(dir.path())
        .args(["-c", "SELECT k, MEDIAN(v) FROM t GROUP BY k"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("[cpu: median()]"), "{text}");
    // EXPLAIN ANALYZE runs through DataFusion and shows the operators' metrics.
    let out = oxide()
        .args(["sql", "--placement", "cuda", "--data"])
        .arg(dir.path())
        .args([
            "-c",
            "EXPLAIN ANALYZE SELECT k, SUM(v) FROM t WHERE v < 10 GROUP BY k",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        text.contains("GpuFilterExec[cuda]") && text.contains("rows_in="),
        "{text}"
    );
    // It also says where the batches ran: on a machine without a GPU, the GPU operators'
    // CPU paths, every batch counted as a CPU fallback.
    let gpu = oxidelake_device::HardwareDetector::new(None)
        .backend()
        .is_ok_and(|b| b.kind() != oxidelake_core::BackendKind::CpuSimd);
    if !gpu {
        assert!(
            text.contains("no_device=") && !text.contains("no_device=0"),
            "{text}"
        );
        assert!(
            text.contains("cpu_fallback_batches=") && !text.contains("cpu_fallback_batches=0"),
            "{text}"
        );
    }
}

#[test]
fn mistakes_give_one_line_on_stderr_and_a_failing_status() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["sql".into(), "-c".into(), "SELEC 1".into()],
            "SQL error",
        ),
        (
            vec![
                "sql".into(),
                "--data".into(),
                dir.path().join("missing").display().to_string(),
                "-c".into(),
                "SELECT 1".into(),
            ],
            "No such file",
        ),
        (
            vec![
                "sql".into(),
                "--cluster".into(),
                format!("df://127.0.0.1:{}", free_port()),
                "-c".into(),
                "SELECT 1".into(),
            ],
            "cannot reach the scheduler",
        ),
        (
            vec![
                "sql".into(),
                "--format".into(),
                "xml".into(),
                "-c".into(),
                "SELECT 1".into(),
            ],
            "table, csv, tsv",
        ),
        (
            vec![
                "sql".into(),
                "--memory-limit".into(),
                "lots".into(),
                "-c".into(),
                "SELECT 1".into(),
            ],
            "--memory-limit",
        ),
        (
            vec![
                "sql".into(),
                "--memory-limit".into(),
                "1G".into(),
                "--mem-pool-type".into(),
                "lru".into(),
                "-c".into(),
                "SELECT 1".into(),
            ],
            "fair or greedy",
        ),
    ];
    for (args, expected) in cases {
        let out = oxide().args(&args).assert().failure().code(1);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn statements_piped_to_the_prompt_run_in_turn() {
    let out = oxide()
        .args(["sql", "--format", "csv"])
        .write_stdin("SELECT 1 AS a;\nSELECT 'x;y' AS b,\n 2 AS c;\n")
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(text, "a\n1\nb,c\nx;y,2\n");
}

#[test]
fn a_memory_limit_makes_a_large_aggregate_spill_and_says_so_with_the_same_result() {
    let dir = lake();
    // No ORDER BY … LIMIT: a TopK cannot reserve while spilling aggregates hold the
    // pool's every share (DataFusion's pools), so the whole result is compared, sorted.
    let query = "SELECT id % 250000 AS g, SUM(v) AS s FROM t GROUP BY g";
    let run = |extra: &[&str]| sql_csv(dir.path(), extra, query);
    let (unlimited, quiet) = run(&[]);
    assert!(!quiet.contains("Spilled"), "{quiet}");
    let (limited, note) = run(&["--memory-limit", "4M"]);
    let sorted = |csv: &str| {
        let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
        lines.sort();
        lines
    };
    assert_eq!(sorted(&limited), sorted(&unlimited));
    assert_eq!(
        unlimited.lines().count(),
        250_001,
        "header and one row per group"
    );
    assert!(
        note.contains("Spilled") && note.contains("to disk"),
        "{note}"
    );
}

/// A spilling join keeps 64 spill files open per partition: on 8 partitions that is more
/// than a soft limit of 200 open files, which `oxide` raises towards the hard limit when a
/// memory limit is set (`oxidelake_memory::open_files`), so the join completes.
#[test]
#[cfg(unix)]
fn a_spilling_join_on_eight_partitions_runs_under_a_low_soft_open_file_limit() {
    let dir = lake();
    let script = format!(
        "ulimit -Sn 200 && exec {} sql --format csv --placement cpu --data {} \
         --memory-limit 4M -c \"SET datafusion.execution.target_partitions = 8\" \
         -c \"SELECT COUNT(*), SUM(a.v) FROM t a JOIN t b ON a.id = b.id\"",
        env!("CARGO_BIN_EXE_oxide"),
        dir.path().display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let sum: i64 = (0..ROWS).map(|id| (id * 7_919) % 1_000).sum();
    assert!(
        stdout.contains(&format!("{ROWS},{sum}")),
        "{stdout}\n{stderr}"
    );
    // The join spilled more files than the soft limit the process started with.
    let files: u64 = stderr
        .split("Spilled ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(files > 200, "{stderr}");
}

#[test]
fn cache_flag_serves_the_query_from_an_ipc_copy_with_the_same_rows() {
    let dir = lake();
    let run = |extra: &[&str]| {
        let (stdout, stderr) = sql_csv(dir.path(), extra, QUERY);
        (parse_csv(stdout.as_bytes()), stderr)
    };
    let (parquet, _) = run(&[]);
    let scratch = tempfile::tempdir().unwrap();
    let cache_dir = scratch.path().join("hot");
    let cache_dir = cache_dir.to_str().unwrap();
    let (cached, note) = run(&["--cache", "t", "--cache-dir", cache_dir]);
    assert_eq!(cached, parquet);
    assert_eq!(cached, expected_sums());
    assert!(note.contains(&format!("cached t: {ROWS} rows")), "{note}");
    let out = oxide()
        .args(["sql", "--data"])
        .arg(dir.path())
        .args([
            "--cache",
            "nosuch",
            "--cache-dir",
            cache_dir,
            "-c",
            "SELECT 1",
        ])
        .assert()
        .failure()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("nosuch"), "{stderr}");
}
