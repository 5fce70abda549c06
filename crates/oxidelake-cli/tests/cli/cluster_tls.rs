//! Mutual TLS between cluster members: a scheduler and two workers as processes with
//! certificates from `scripts/make-cluster-certs.sh`, and `oxide sql --cluster` as the
//! client. A member without a certificate the cluster's CA signed is refused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;

use super::local_cluster::{LocalCluster, free_port};

/// A process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `scripts/make-cluster-certs.sh DIR [NAME]`; panics when the script fails (it needs
/// openssl, which `.ci/run` installs).
pub(super) fn make_certs(dir: &Path, name: Option<&str>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-cluster-certs.sh");
    let mut cmd = StdCommand::new("bash");
    cmd.arg(script).arg(dir);
    if let Some(name) = name {
        cmd.arg(name);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "make-cluster-certs.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--tls-ca CA --tls-cert DIR/NAME.pem --tls-key DIR/NAME.key`.
pub(super) fn tls_flags(ca: &Path, dir: &Path, name: &str) -> Vec<String> {
    let path = |file: PathBuf| file.to_str().unwrap().to_string();
    vec![
        "--tls-ca".into(),
        path(ca.to_path_buf()),
        "--tls-cert".into(),
        path(dir.join(format!("{name}.pem"))),
        "--tls-key".into(),
        path(dir.join(format!("{name}.key"))),
    ]
}

/// What `openssl s_client` reports when it connects to 127.0.0.1:`port` trusting `ca`
/// and presenting `identity` (certificate, key) if given, and waits a second for the
/// server: a TLS 1.3 server refuses a client certificate after the handshake, with an
/// alert the client reads only then.
fn handshake(port: u16, ca: &Path, identity: Option<(&Path, &Path)>) -> String {
    let mut cmd = format!(
        "sleep 1 | openssl s_client -connect 127.0.0.1:{port} -CAfile '{}'",
        ca.display()
    );
    if let Some((cert, key)) = identity {
        cmd.push_str(&format!(
            " -cert '{}' -key '{}'",
            cert.display(),
            key.display()
        ));
    }
    let out = StdCommand::new("bash").args(["-c", &cmd]).output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `oxide sql --format csv [--cluster URL] [FLAGS] -c SQL`: (success, stdout, stderr).
fn sql(cluster: Option<&str>, flags: &[String], query: &str) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_oxide"));
    cmd.args(["sql", "--format", "csv"]);
    if let Some(url) = cluster {
        cmd.args(["--cluster", url]);
    }
    let out = cmd
        .args(flags)
        .args(["-c", query])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_tls_cluster_answers_members_with_its_certificates_and_refuses_the_others() {
    let scratch = tempfile::tempdir().unwrap();
    let (trusted, rogue) = (scratch.path().join("ca"), scratch.path().join("rogue"));
    make_certs(&trusted, Some("member"));
    make_certs(&trusted, Some("client"));
    make_certs(&rogue, Some("intruder"));
    let ca = trusted.join("ca.pem");

    // 20,000 rows in 7 groups; the GROUP BY shuffles between stages (their tasks
    // spread over the two workers as the scheduler chooses).
    let data = scratch.path().join("t.parquet");
    let (ok, _, stderr) = sql(
        None,
        &[],
        &format!(
            "COPY (SELECT value % 7 AS k, value AS v FROM generate_series(1, 20000)) \
             TO '{}' STORED AS PARQUET",
            data.display()
        ),
    );
    assert!(ok, "{stderr}");
    let query = format!(
        "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM '{}' GROUP BY k ORDER BY k",
        data.display()
    );
    let (ok, embedded, stderr) = sql(None, &[], &query);
    assert!(ok, "{stderr}");

    let member = tls_flags(&ca, &trusted, "member");
    let member: Vec<&str> = member.iter().map(String::as_str).collect();
    let cluster = LocalCluster::start_with_args("cpu", 2, &member, &member);
    let url = cluster.url();

    let (ok, stdout, stderr) = sql(Some(&url), &tls_flags(&ca, &trusted, "client"), &query);
    assert!(
        ok,
        "a client with the CA's certificate is answered: {stderr}"
    );
    assert_eq!(stdout, embedded, "same rows as embedded mode");
    assert_eq!(stdout.lines().count(), 8, "{stdout}");

    // No certificate at all: plaintext against a TLS port.
    let (ok, stdout, stderr) = sql(Some(&url), &[], "SELECT 1 AS one");
    assert!(
        !ok && stdout.is_empty(),
        "a client without TLS gets no answer: {stdout} {stderr}"
    );
    assert!(
        stderr.contains("the connection was closed") && stderr.contains("a client without TLS"),
        "{stderr}"
    );

    // TLS, trusting the cluster's CA, but presenting a certificate another CA signed:
    // the scheduler refuses it during the handshake.
    let mut intruder = tls_flags(&ca, &rogue, "intruder");
    let (ok, stdout, stderr) = sql(Some(&url), &intruder, "SELECT 1 AS one");
    assert!(
        !ok && stdout.is_empty(),
        "a client whose certificate the CA did not sign gets no answer: {stdout} {stderr}"
    );
    // Whether the client reads the scheduler's TLS alert or only the closed
    // connection depends on timing; both name the certificate as a cause.
    assert!(
        stderr.contains("refused this client's TLS certificate")
            || stderr.contains("whose certificate its CA did not sign"),
        "{stderr}"
    );

    // Below the client: both listening services of the cluster, the scheduler's gRPC
    // port and a worker's Flight port (shuffle data, results), require a certificate
    // and refuse one another CA signed; a member's is accepted.
    let scheduler_port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let intruder_identity = (rogue.join("intruder.pem"), rogue.join("intruder.key"));
    let member_identity = (trusted.join("member.pem"), trusted.join("member.key"));
    for (service, port) in [
        ("scheduler", scheduler_port),
        ("worker Flight", cluster.flight_port(1)),
    ] {
        let said = handshake(port, &ca, None);
        assert!(
            said.contains("alert certificate required"),
            "{service}: a client without a certificate is refused: {said}"
        );
        let said = handshake(
            port,
            &ca,
            Some((&intruder_identity.0, &intruder_identity.1)),
        );
        assert!(
            said.contains("alert"),
            "{service}: another CA's certificate is refused: {said}"
        );
        let said = handshake(port, &ca, Some((&member_identity.0, &member_identity.1)));
        assert!(
            said.contains("Verify return code: 0 (ok)") && !said.contains("alert"),
            "{service}: a member's certificate is accepted: {said}"
        );
    }

    // An executor with that certificate: the scheduler refuses every poll, so it never
    // joins (its log shows the scheduler's TLS alert).
    let log = scratch.path().join("intruder-worker.log");
    let _worker = Killed(
        StdCommand::new(env!("CARGO_BIN_EXE_oxide-worker"))
            .args(["--scheduler-port", url.rsplit(':').next().unwrap()])
            .args(["--bind-port", &free_port().to_string()])
            .args(["--bind-grpc-port", &free_port().to_string()])
            .args(["--vcores", "2", "--log", "warn"])
            .args(&intruder)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let refused = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("Executor poll work loop failed") && text.contains("received fatal alert")
        {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::park_timeout(Duration::from_millis(200));
    };
    assert!(
        refused,
        "the intruding executor's polls are refused: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // The intruder trusting only its own CA refuses the scheduler's certificate.
    intruder[1] = rogue.join("ca.pem").to_str().unwrap().to_string();
    let (ok, _, stderr) = sql(Some(&url), &intruder, "SELECT 1 AS one");
    assert!(
        !ok && stderr.contains("does not trust a cluster member's TLS certificate"),
        "{stderr}"
    );

    // The cluster still answers its members after the refusals.
    let (ok, stdout, stderr) = sql(Some(&url), &tls_flags(&ca, &trusted, "client"), &query);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, embedded);
}

#[test]
fn tls_mistakes_are_refused_with_the_cause_named() {
    let scratch = tempfile::tempdir().unwrap();
    make_certs(scratch.path(), Some("member"));
    let flags = tls_flags(&scratch.path().join("ca.pem"), scratch.path(), "member");

    // A key that belongs to another certificate.
    make_certs(scratch.path(), Some("other"));
    let mut mismatched = flags.clone();
    mismatched[5] = scratch.path().join("other.key").to_str().unwrap().into();
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-scheduler"))
        .args(["--bind-port", "0"])
        .args(&mismatched)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("other.key") && stderr.contains("does not fit the certificate"),
        "{stderr}"
    );

    // TLS needs pull-staged scheduling.
    let out = Command::new(env!("CARGO_BIN_EXE_oxide-worker"))
        .args(["--task-scheduling-policy", "push-staged"])
        .args(&flags)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("needs pull-staged scheduling"),
        "{stderr}"
    );

    // A TLS client against a plaintext scheduler.
    let plaintext = LocalCluster::start_with("cpu", 0, &[]);
    let (ok, _, stderr) = sql(Some(&plaintext.url()), &flags, "SELECT 1");
    assert!(!ok && stderr.contains("does not speak TLS"), "{stderr}");
    drop(plaintext);

    // One flag alone is refused by the argument parser.
    let out = Command::new(env!("CARGO_BIN_EXE_oxide"))
        .args(["sql", "--cluster", "df://127.0.0.1:1", "--tls-ca"])
        .arg(scratch.path().join("ca.pem"))
        .args(["-c", "SELECT 1"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--tls-cert"),
        "{stderr}"
    );
}
