//! `oxide-scheduler --allowed-root`: a client's SQL reads and writes files only inside
//! the scheduler's allowed roots. A scheduler and a worker run as processes; the client
//! is `oxide sql --cluster`, or an anonymous Arrow Flight SQL client of
//! `oxide-scheduler --flight-sql`, whose DDL runs on the scheduler itself. That client
//! also cannot end the scheduler with a statement nested too deep to plan.

use std::path::Path;
use std::time::Duration;

use arrow_flight::error::FlightError;
use arrow_flight::sql::client::FlightSqlServiceClient;
use assert_cmd::Command;
use futures::TryStreamExt;
use tonic::transport::Channel;

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
        !ok && stderr.contains("through a symbolic link"),
        "a read through the link is refused: {stderr}"
    );
    let (ok, _, stderr) = cluster_sql(&cluster, &[copy(&link.join("linked.parquet"))]);
    assert!(
        !ok && stderr.contains("through a symbolic link"),
        "a write through the link is refused: {stderr}"
    );
    assert!(!outside.path().join("linked.parquet").exists());
    drop(cluster);
}

/// A Flight SQL client's error as `error: ` and the server's message.
fn flight_error(e: FlightError) -> String {
    match e {
        // The message only: the status's metadata holds response headers (a date).
        FlightError::Tonic(status) => format!("error: {}", status.message()),
        other => format!("error: {other}"),
    }
}

/// A runtime for the Flight SQL client.
fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An anonymous Flight SQL client (no handshake: no rights) of `cluster`'s scheduler.
async fn flight_sql_client(cluster: &LocalCluster) -> FlightSqlServiceClient<Channel> {
    let address = cluster.url().replace("df://", "http://");
    let channel = Channel::from_shared(address)
        .unwrap()
        .connect()
        .await
        .unwrap();
    FlightSqlServiceClient::new(channel)
}

/// What an anonymous Flight SQL client gets back for `sql`: the rows pretty-printed, or
/// `error: ` and the server's message.
async fn flight_sql(client: &mut FlightSqlServiceClient<Channel>, sql: &str) -> String {
    let info = match client.execute(sql.to_string(), None).await {
        Ok(info) => info,
        Err(e) => return flight_error(e),
    };
    let mut batches = Vec::new();
    for ticket in info.endpoint.into_iter().filter_map(|e| e.ticket) {
        let rows = match client.do_get(ticket).await {
            Ok(stream) => stream.try_collect::<Vec<_>>().await,
            Err(e) => Err(e),
        };
        match rows {
            Ok(mut rows) => batches.append(&mut rows),
            Err(e) => return flight_error(e),
        }
    }
    arrow::util::pretty::pretty_format_batches(&batches)
        .map(|table| table.to_string())
        .unwrap_or_else(|e| format!("error: {e}"))
}

#[test]
fn a_flight_sql_client_gets_no_byte_of_a_file_outside_the_allowed_roots() {
    let (allowed, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Canonical, as the scheduler makes its root: locations are compared as written.
    let allowed_dir = std::fs::canonicalize(allowed.path()).unwrap();
    let outside_dir = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(allowed_dir.join("ok.csv"), "visible_col\n1\n").unwrap();
    let creds = outside_dir.join("creds.txt");
    std::fs::write(
        &creds,
        "root:SECRET-HASH:19000:0\nadmin:SECRET-TOO:19000:0\n",
    )
    .unwrap();
    let link = allowed_dir.join("link.csv");
    std::os::unix::fs::symlink(&creds, &link).unwrap();
    let root = allowed_dir.to_str().unwrap();
    let cluster = LocalCluster::start_with("cpu", 1, &["--allowed-root", root, "--flight-sql"]);

    let create = |name: &str, location: &str, options: &str| {
        format!(
            "CREATE EXTERNAL TABLE {name} STORED AS CSV LOCATION '{location}' \
             OPTIONS ({options})"
        )
    };
    let delimiter = "'format.delimiter' '|'";
    // `format.comment` skips the lines starting with `r`: the second line becomes the
    // header, so any line could be read this way.
    let skip_first = "'format.delimiter' '|', 'format.comment' 'r'";
    let creds_text = creds.display().to_string();
    let locations = [
        creds_text.clone(),
        format!("file://{creds_text}"),
        format!(
            "{root}/../{}/creds.txt",
            outside_dir.file_name().unwrap().to_str().unwrap()
        ),
        format!("{}/*.txt", outside_dir.display()),
        format!("{}/", outside_dir.display()),
        link.display().to_string(),
    ];

    client_runtime().block_on(async {
        let mut client = flight_sql_client(&cluster).await;

        // The channel carries a table's columns: one inside the root is declared and
        // described, through the same statements the attempts below use.
        let inside = allowed_dir.join("ok.csv").display().to_string();
        let created = flight_sql(&mut client, &create("ok", &inside, delimiter)).await;
        assert!(!created.starts_with("error"), "{created}");
        let described = flight_sql(&mut client, "DESCRIBE ok").await;
        assert!(described.contains("visible_col"), "{described}");

        let mut seen = String::new();
        for (i, location) in locations.iter().enumerate() {
            for options in [delimiter, skip_first] {
                let name = format!("c{i}");
                let created = flight_sql(&mut client, &create(&name, location, options)).await;
                assert!(
                    created.starts_with("error") && created.contains("allowed roots"),
                    "{location} is refused: {created}"
                );
                seen.push_str(&created);
                for sql in [
                    format!("DESCRIBE {name}"),
                    format!("SHOW COLUMNS FROM {name}"),
                    "SELECT table_name, column_name FROM information_schema.columns".into(),
                    format!("SELECT * FROM {name}"),
                ] {
                    seen.push_str(&flight_sql(&mut client, &sql).await);
                }
            }
        }
        assert!(
            !seen.contains("SECRET"),
            "no byte of the file reaches the client: {seen}"
        );

        // Nor whether a path outside the roots exists: the refusals read the same.
        let absent = outside_dir.join("absent.txt").display().to_string();
        let existing = flight_sql(&mut client, &create("e", &creds_text, delimiter)).await;
        let missing = flight_sql(&mut client, &create("e", &absent, delimiter)).await;
        assert_eq!(
            existing.replace("creds.txt", "NAME"),
            missing.replace("absent.txt", "NAME")
        );
    });
    drop(cluster);
}

#[test]
fn a_flight_sql_statement_nested_too_deep_is_refused_and_the_scheduler_answers_on() {
    let cluster = LocalCluster::start_with("cpu", 1, &["--flight-sql"]);
    client_runtime().block_on(async {
        let mut client = flight_sql_client(&cluster).await;
        let deep = format!("SELECT 1{}", "+1".repeat(20_000));
        // Each entry point that takes SQL text: a statement, a prepared statement, an
        // update.
        let refusals = [
            flight_sql(&mut client, &deep).await,
            match client.prepare(deep.clone(), None).await {
                Ok(_) => "prepared".to_string(),
                Err(e) => flight_error(e),
            },
            match client.execute_update(deep.clone(), None).await {
                Ok(rows) => format!("updated {rows}"),
                Err(e) => flight_error(e),
            },
        ];
        for refusal in refusals {
            assert!(
                refusal.starts_with("error: ")
                    && refusal.contains("invalid statement")
                    && refusal.contains("at most 10000"),
                "{refusal}"
            );
        }
        let answered = flight_sql(&mut client, "SELECT 1 AS one").await;
        assert!(
            answered.contains("| one |") && answered.contains("| 1   |"),
            "the scheduler still answers: {answered}"
        );
    });
    drop(cluster);
}
