//! `oxide tui` runs a real query over a Parquet file and shows it in the dashboard,
//! driven through a real pseudo-terminal with termlens.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use oxidelake_storage::{LakeWriterOptions, write_parquet_file};
use termlens::{Key, Screen, Terminal};

use super::cluster_tls::{make_certs, tls_flags};
use super::local_cluster::LocalCluster;

/// The deadline of every wait except the query's.
const WAIT: Duration = Duration::from_secs(10);
/// The deadline for the query to finish: a debug build on a two-core machine, while the
/// other tests of this binary run beside it.
const QUERY_WAIT: Duration = Duration::from_secs(60);

const QUERY: &str = "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t WHERE a < 5000 GROUP BY k";

/// Writes 10 000 rows of `k = i % 10`, `a = i`, `b = i / 2` to `path`, in ten batches.
fn write_table(path: &Path) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Float64, false),
    ]));
    let batches: Vec<RecordBatch> = (0..10_i64)
        .map(|batch| {
            let ids = batch * 1000..(batch + 1) * 1000;
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| i % 10))),
                Arc::new(Int64Array::from_iter_values(ids.clone())),
                Arc::new(Float64Array::from_iter_values(ids.map(|i| i as f64 * 0.5))),
            ];
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    write_parquet_file(path, schema, &batches, &LakeWriterOptions::default()).unwrap();
}

/// `oxide ARGS…` (a `tui` command) in a 120×40 pseudo-terminal in `dir`, with an empty
/// environment.
fn oxide_tui(dir: &Path, args: &[&str]) -> termlens::Result<Terminal> {
    Terminal::builder()
        .size(120, 40)
        .env_clear()
        .current_dir(dir)
        .timeout(WAIT)
        .args(args)
        .spawn(env!("CARGO_BIN_EXE_oxide"))
}

/// The device tag the plan shows, if any.
fn device_tag(screen: &Screen) -> Option<&'static str> {
    ["[CPU]", "[CUDA]"]
        .into_iter()
        .find(|tag| screen.contains(tag))
}

/// Where a duration starts in `line` at or after char `from`: a number (digits, `.`,
/// `,`) followed by ` ms`. Returns the char index of the number and the index past ` ms`.
fn find_duration(line: &[char], from: usize) -> Option<(usize, usize)> {
    let is_number = |c: char| c.is_ascii_digit() || c == '.' || c == ',';
    (from..line.len()).find_map(|start| {
        let starts_number =
            line[start].is_ascii_digit() && (start == 0 || !is_number(line[start - 1]));
        if !starts_number {
            return None;
        }
        let digits_end = (start..line.len())
            .find(|&i| !is_number(line[i]))
            .unwrap_or(line.len());
        let unit: String = line[digits_end..].iter().take(3).collect();
        (unit == " ms").then_some((start, digits_end + 3))
    })
}

/// The snapshot text of `screen` (see `termlens::Screen`'s `Display`) with every
/// wall-clock duration's number replaced by `#`, so it is the same on every run: the
/// query's elapsed time in the title bar, per-batch latencies in the Plan and Inspector
/// panels. Inside a panel the columns the number gave up go back as padding before the
/// panel's right border, so no border moves whatever the number of digits; in the title
/// bar (row 0) the text after it closes up, which is what the dashboard itself does.
fn redact_durations(screen: &Screen) -> String {
    let text = screen.to_string();
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let mut out = vec![header.to_owned()];
    for (row, line) in lines.enumerate() {
        let mut line: Vec<char> = line.chars().collect();
        let mut from = 0;
        while let Some((start, unit_end)) = find_duration(&line, from) {
            let digits_end = unit_end - " ms".len();
            let freed = digits_end - start - 1;
            line.splice(start..digits_end, ['#']);
            let unit_end = unit_end - freed;
            if row > 0
                && let Some(border) = (unit_end..line.len()).find(|&i| line[i] == '│')
            {
                line.splice(border..border, std::iter::repeat_n(' ', freed));
            }
            from = unit_end;
        }
        out.push(redact_host_gauge(line.into_iter().collect()));
    }
    out.join("\n")
}

/// The host gauge's row with its figures replaced: the pool's peak depends on how the
/// batches interleaved, so it differs from run to run (the tests check it by value).
fn redact_host_gauge(line: String) -> String {
    let Some(host) = line.find("Host ") else {
        return line;
    };
    let chars: Vec<char> = line.chars().collect();
    let host = line[..host].chars().count();
    let start = chars[..host]
        .iter()
        .rposition(|&c| c == '│')
        .map_or(0, |i| i + 1);
    let end = (host..chars.len())
        .find(|&i| chars[i] == '│')
        .unwrap_or(chars.len());
    let text = "Host (figures vary per run)";
    let width = end - start;
    let mut cell: Vec<char> = format!("{text:^width$}").chars().collect();
    cell.truncate(width);
    chars[..start]
        .iter()
        .copied()
        .chain(cell)
        .chain(chars[end..].iter().copied())
        .collect()
}

#[test]
fn duration_redaction_hides_the_digits_without_moving_any_border() {
    // Panels pad their lines to a fixed inner width, as ratatui draws them.
    let screen = |elapsed: &str, latency: &str| {
        let plan = format!("Filter 5 rows  {latency} ms/batch");
        let inspector = format!("batch  {latency} ms × 4");
        let text = format!(
            "size: 50x3  cursor: hidden\n OxideLake │ finished in {elapsed} ms, 10 rows │ SELECT\n\
             │{plan:<30}││x│\n│{inspector:<30}││y│"
        );
        Screen::parse(&text).unwrap()
    };
    let fast = redact_durations(&screen("4", "0.012"));
    let slow = redact_durations(&screen("1234", "12.345"));
    assert_eq!(fast, slow);
    assert_eq!(
        fast,
        format!(
            "size: 50x3  cursor: hidden\n OxideLake │ finished in # ms, 10 rows │ SELECT\n\
             │{:<30}││x│\n│{:<30}││y│",
            "Filter 5 rows  # ms/batch", "batch  # ms × 4"
        )
    );
}

#[test]
fn oxide_tui_runs_a_parquet_query_to_finished_and_quits_on_q() -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    write_table(&dir.path().join("t.parquet"));

    // A cleared environment leaves OXIDE_BACKEND unset (the default backend choice) and
    // keeps the host's RUST_LOG and colours out of the picture. The table is named
    // relative to the working directory, so the temp path never reaches the screen.
    let mut t = oxide_tui(dir.path(), &["tui", "--table", "t=t.parquet", "-c", QUERY])?;

    t.wait_until_for(|s| s.contains("finished"), QUERY_WAIT)?;
    let screen = t.snapshot_after(|s| s.contains("finished"))?;
    let title = screen.row_text(0);
    assert!(
        title.contains(" OxideLake │ finished in ")
            && title.contains(" ms, 10 rows │ SELECT k, SUM(a)"),
        "the title bar names the product, the finished status, ten result rows and the \
         query:\n{screen}"
    );
    assert!(
        screen.contains("AggregateExec"),
        "the plan shows the aggregate (AggregateExec or GpuPartialAggregateExec):\n{screen}"
    );
    let tag = device_tag(&screen);
    assert!(tag.is_some(), "the plan tags its device:\n{screen}");

    // The CPU build and a CUDA build draw different plans; each has its own snapshot.
    let backend = if tag == Some("[CUDA]") { "cuda" } else { "cpu" };
    insta::assert_snapshot!(
        format!("oxide_tui_group_by_finished_{backend}"),
        redact_durations(&screen)
    );

    t.send(Key::Char('q'))?;
    let status = t.wait_exit()?;
    assert_eq!(status.code(), Some(0), "status: {status}");
    Ok(())
}

#[test]
fn oxide_tui_placed_for_cuda_shows_the_gpu_operators_with_their_tags() -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    write_table(&dir.path().join("t.parquet"));
    // Placing for CUDA gives the same plan on every machine; without a GPU the GPU
    // operators run their CPU paths, which is what this machine shows.
    let mut t = oxide_tui(
        dir.path(),
        &[
            "tui",
            "--placement",
            "cuda",
            "--table",
            "t=t.parquet",
            "-c",
            QUERY,
        ],
    )?;
    t.wait_until_for(|s| s.contains("finished"), QUERY_WAIT)?;
    let screen = t.snapshot_after(|s| s.contains("finished"))?;
    // Where the batches ran, not only where they were placed: on a machine without a
    // GPU the tag says so.
    let gpu = oxidelake_device::HardwareDetector::new(None)
        .backend()
        .is_ok_and(|b| b.kind() != oxidelake_core::BackendKind::CpuSimd);
    let tag = if gpu {
        "[CUDA]"
    } else {
        "[CUDA→CPU: no GPU]"
    };
    for expected in [
        format!("GpuFilterExec {tag}"),
        // The longer tag leaves the aggregate's name cut short.
        if gpu {
            format!("GpuPartialAggregateExec {tag}")
        } else {
            format!("GpuPartialAggregat… {tag}")
        },
        "10 rows".to_string(),
    ] {
        assert!(screen.contains(&expected), "{expected} missing:\n{screen}");
    }
    if !gpu {
        insta::assert_snapshot!(
            "oxide_tui_group_by_placed_for_cuda_without_a_gpu",
            redact_durations(&screen)
        );
    }
    t.send(Key::Char('q'))?;
    let status = t.wait_exit()?;
    assert_eq!(status.code(), Some(0), "status: {status}");
    Ok(())
}

/// Writes `rows` rows of `k = i` (every key distinct), `a = i % 7` to `path`.
fn write_distinct_keys(path: &Path, rows: i64) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("a", DataType::Int64, false),
    ]));
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(50_000)
        .map(|start| {
            let ids = start..(start + 50_000).min(rows);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(ids.clone())),
                Arc::new(Int64Array::from_iter_values(ids.map(|i| i % 7))),
            ];
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    write_parquet_file(path, schema, &batches, &LakeWriterOptions::default()).unwrap();
}

/// The number after `label` on the screen (digits and separators), if any.
fn number_after(screen: &Screen, label: &str) -> Option<u64> {
    let text = screen.text();
    let at = text.find(label)? + label.len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[test]
fn oxide_tui_under_a_memory_limit_shows_the_host_peak_and_the_spills() -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    write_distinct_keys(&dir.path().join("t.parquet"), 400_000);
    let mut t = oxide_tui(
        dir.path(),
        &[
            "tui",
            "--memory-limit",
            "4M",
            "--table",
            "t=t.parquet",
            "-c",
            "SELECT k, SUM(a) FROM t GROUP BY k",
        ],
    )?;
    t.wait_until_for(|s| s.contains("finished"), QUERY_WAIT)?;
    let screen = t.snapshot_after(|s| s.contains("finished"))?;
    assert!(
        screen.contains("400,000 rows") || screen.contains("400000 rows"),
        "the query returned every group:\n{screen}"
    );
    assert!(
        screen.contains("Host") && screen.contains("/ 4.0 MiB peak "),
        "the host gauge is drawn against the limit and shows the peak:\n{screen}"
    );
    assert!(
        !screen.contains("peak 0 B"),
        "the pool saw the query's memory:\n{screen}"
    );
    let spills = number_after(&screen, "spill ↓").unwrap_or(0);
    assert!(spills > 0, "the spill counter is non-zero:\n{screen}");
    t.send(Key::Char('q'))?;
    let status = t.wait_exit()?;
    assert_eq!(status.code(), Some(0), "status: {status}");
    Ok(())
}

#[test]
fn oxide_tui_on_a_cluster_runs_the_query_there_and_lists_the_stages_it_ran() -> termlens::Result<()>
{
    let cluster = LocalCluster::start("cuda");
    the_dashboard_lists_the_stages_the_cluster_ran(cluster, &[])
}

#[test]
fn oxide_tui_on_a_tls_cluster_follows_the_job_over_tls() -> termlens::Result<()> {
    let certs = tempfile::tempdir().unwrap();
    make_certs(certs.path(), Some("member"));
    let flags = tls_flags(&certs.path().join("ca.pem"), certs.path(), "member");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let cluster = LocalCluster::start_with_args("cuda", 1, &flags, &flags);
    the_dashboard_lists_the_stages_the_cluster_ran(cluster, &flags)
}

/// `oxide tui --cluster` on `cluster` with `client_flags`: the ten rows arrive and the
/// stages the scheduler reports are listed under the job (they come from the scheduler
/// over the client's own connection settings).
fn the_dashboard_lists_the_stages_the_cluster_ran(
    cluster: LocalCluster,
    client_flags: &[&str],
) -> termlens::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.parquet");
    write_table(&table);
    let table = format!("t={}", table.display());
    let url = cluster.url();
    let mut args = vec!["tui", "--cluster", &url, "--table", &table, "-c", QUERY];
    args.extend_from_slice(client_flags);
    let mut t = oxide_tui(dir.path(), &args)?;

    t.wait_until_for(|s| s.contains("finished"), QUERY_WAIT)?;
    // The last update asks the scheduler once more after the result arrived.
    let screen = t.snapshot_after(|s| s.contains("Stage 2"))?;
    assert!(
        screen
            .row_text(0)
            .contains(" ms, 10 rows │ SELECT k, SUM(a)"),
        "the cluster's ten rows reached the dashboard:\n{screen}"
    );
    // Only the scheduler knows the stages: the client's plan is the one node that
    // submits the job.
    assert!(screen.contains("DistributedQueryExec"), "{screen}");
    assert!(
        screen.contains("2 stages completed on the"),
        "the inspector of the selected job row counts the stages:\n{screen}"
    );
    assert!(
        screen.contains("Stage 1") && screen.contains("Stage 2"),
        "a grouped aggregate runs as a partial and a final stage:\n{screen}"
    );
    assert!(screen.contains("ShuffleWriterExec"), "{screen}");
    assert!(
        screen.contains("[CUDA"),
        "the stages the scheduler placed for cuda carry the tag:\n{screen}"
    );
    assert!(!screen.contains("unavailable"), "{screen}");

    t.send(Key::Char('q'))?;
    let status = t.wait_exit()?;
    assert_eq!(status.code(), Some(0), "status: {status}");
    drop(cluster);
    Ok(())
}

#[test]
fn quitting_the_cluster_dashboard_mid_query_cancels_the_job_on_the_scheduler()
-> termlens::Result<()> {
    let data = crate::generated::tpch_data(1.0);
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start_with("cuda", 1, &["--log", "info"]);
    let data_dir = data.path().display().to_string();
    // A join over TPC-H SF 1: several seconds on this build, so q comes while it runs.
    let query = "SELECT o_orderpriority, COUNT(*) FROM orders JOIN lineitem \
                 ON o_orderkey = l_orderkey GROUP BY o_orderpriority";
    let mut t = oxide_tui(
        dir.path(),
        &[
            "tui",
            "--cluster",
            &cluster.url(),
            "--data",
            &data_dir,
            "-c",
            query,
        ],
    )?;
    // The job row names the job once the client knows its id.
    t.wait_until_for(|s| s.contains("stages completed"), QUERY_WAIT)?;
    let screen = t.snapshot_after(|s| s.contains("stages completed"))?;
    assert!(
        !screen.contains("finished"),
        "the query ended before q:\n{screen}"
    );
    t.send(Key::Char('q'))?;
    let status = t.wait_exit()?;
    assert_eq!(status.code(), Some(0), "status: {status}");
    // The dashboard asked the scheduler to cancel the job before it exited.
    let log = cluster.scheduler_log();
    assert!(
        log.contains("Received cancellation request for job"),
        "no cancellation in the scheduler's log:\n{log}"
    );
    Ok(())
}
