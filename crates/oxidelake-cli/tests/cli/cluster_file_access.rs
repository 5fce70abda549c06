//! `oxide-scheduler --allowed-root`: a client's SQL reads and writes files only inside
//! the scheduler's allowed roots. A scheduler and a worker run as processes; the client
//! is `oxide sql --cluster`.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;

use super::local_cluster::LocalCluster;

/// `oxide sql --cluster URL --format csv -c SQL…`: (success, stdout, stderr).
fn cluster_sql(cluster: &LocalCluster, statements: &[String]) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_oxide"));
    cmd.args(["sql", "--format", "csv", "--cluster", &cluster.url()]);
    for s in statements {
        cmd.arg("-c").arg(s);
    }
    let out = cmd.timeout(Duration::from_secs(120)).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// A 3-row Parquet file at `path`, written through the embedded engine.
fn write_parquet(path: &Path) {
    Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["sql", "-q", "-c"])
        .arg(format!(
            "COPY (SELECT * FROM (VALUES (1), (2), (3)) AS v(x)) TO '{}' STORED AS PARQUET",
            path.display()
        ))
        .assert()
        .success();
}

#[test]
fn a_scheduler_with_allowed_roots_refuses_reads_and_writes_outside_them() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (inside_file, outside_file) = (
        allowed.path().join("in.parquet"),
        outside.path().join("out.parquet"),
    );
    write_parquet(&inside_file);
    write_parquet(&outside_file);
    let root = allowed.path().to_str().unwrap();
    let cluster = LocalCluster::start_with("cpu", 1, &["--allowed-root", root]);

    let count = |file: &Path| format!("SELECT COUNT(*) AS n FROM '{}'", file.display());
    let (ok, stdout, stderr) = cluster_sql(&cluster, &[count(&inside_file)]);
    assert!(ok, "a file inside the root is read: {stderr}");
    assert_eq!(stdout.trim(), "n\n3", "{stdout}");

    let (ok, _, stderr) = cluster_sql(&cluster, &[count(&outside_file)]);
    assert!(!ok, "a file outside the root is refused");
    assert!(
        stderr.contains("outside the cluster's allowed roots") && stderr.contains("out.parquet"),
        "the error names the file and the rule: {stderr}"
    );

    // A table declared over the outside directory is refused when it is read.
    let (ok, _, stderr) = cluster_sql(
        &cluster,
        &[
            format!(
                "CREATE EXTERNAL TABLE o STORED AS PARQUET LOCATION '{}/'",
                outside.path().display()
            ),
            "SELECT COUNT(*) FROM o".into(),
        ],
    );
    assert!(
        !ok && stderr.contains("outside the cluster's allowed roots"),
        "{stderr}"
    );

    // Writes: inside lands, outside is refused and writes nothing.
    let copy = |target: &Path| {
        format!(
            "COPY (SELECT 7 AS x) TO '{}' STORED AS PARQUET",
            target.display()
        )
    };
    let (inside_copy, outside_copy) = (
        allowed.path().join("copied.parquet"),
        outside.path().join("copied.parquet"),
    );
    let (ok, _, stderr) = cluster_sql(&cluster, &[copy(&inside_copy)]);
    assert!(ok, "COPY inside the root: {stderr}");
    assert!(inside_copy.exists());
    let (ok, _, stderr) = cluster_sql(&cluster, &[copy(&outside_copy)]);
    assert!(!ok && stderr.contains("writing"), "{stderr}");
    assert!(
        !outside_copy.exists(),
        "nothing was written outside the root"
    );

    // A sibling whose name starts like the root is not inside it.
    let sibling = Path::new(&format!("{root}-sibling")).to_path_buf();
    std::fs::create_dir_all(&sibling).unwrap();
    let sibling_file = sibling.join("s.parquet");
    write_parquet(&sibling_file);
    let (ok, _, stderr) = cluster_sql(&cluster, &[count(&sibling_file)]);
    std::fs::remove_dir_all(&sibling).unwrap();
    assert!(
        !ok && stderr.contains("outside the cluster's allowed roots"),
        "{stderr}"
    );

    // A symbolic link inside the root that leads outside it: neither read nor written
    // through.
    let link = allowed.path().join("link");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let (ok, _, stderr) = cluster_sql(&cluster, &[count(&link.join("out.parquet"))]);
    assert!(
        !ok && stderr.contains("leads through a symbolic link"),
        "a read through the link is refused: {stderr}"
    );
    let (ok, _, stderr) = cluster_sql(&cluster, &[copy(&link.join("linked.parquet"))]);
    assert!(
        !ok && stderr.contains("leads through a symbolic link"),
        "a write through the link is refused: {stderr}"
    );
    assert!(!outside.path().join("linked.parquet").exists());
    drop(cluster);
}
