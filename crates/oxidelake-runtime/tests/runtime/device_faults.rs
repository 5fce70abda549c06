//! Fault injection on the emulated CUDA driver (tools/cuda-emu) at every device
//! allocation, copy and kernel launch of TPC-H Q3 and Q18 with device-resident batches,
//! and at 16 kernel executions spread over each query's (a sticky fault: see
//! [`STICKY_RUNS`]), one fault per run, and once with the device out of memory: every run must return DuckDB's answer, and every fault that struck must be
//! counted (a batch replayed on the CPU: `device_errors` in the plan's metrics; or the
//! query run again on the CPU placement: `QueryStream::reran_on_cpu`).
//!
//! A fault-free run first counts the calls each fault site sees; then call `N` of the
//! site fails in run `N`. Runs are not perfectly repeatable (partitions race, and a
//! fault changes what runs after it), so a run whose site saw fewer than `N` calls is
//! counted as not struck; each site must be struck in most of its runs.
//!
//! Runs only under `scripts/test-cuda-emulated.sh` (`OXIDE_BACKEND=cuda`, the emulator as
//! libcuda, DuckDB in `OXIDE_DUCKDB_PYTHONPATH`); on a real driver the emulator's hooks
//! do not exist and the test says so and returns.

use std::ffi::{CString, c_char, c_int};
use std::sync::OnceLock;

use oxidelake_runtime::cli::tpch::tpch_query;

use super::data::{cells, metric_sum, tpch_lake};
use super::tpch_oracle::{cell_equal, duckdb_rows};

/// The scale factor: small enough that each query makes a few hundred driver calls.
const SF: f64 = 0.01;

/// The fault sites a query's device work reaches (`module`: kernels are loaded once
/// per process, before the campaign; `host_alloc`: pinned staging falls back to pageable
/// memory, which is no device failure).
const SITES: [&str; 4] = ["alloc", "copy", "launch", "kernel"];

type SetFault = unsafe extern "C" fn(*const c_char) -> c_int;
type FaultCalls = unsafe extern "C" fn(*const c_char) -> u64;

/// The loaded libcuda, kept for the life of the process.
fn library() -> Option<&'static libloading::Library> {
    static LIBRARY: OnceLock<Option<&'static libloading::Library>> = OnceLock::new();
    *LIBRARY.get_or_init(|| {
        // SAFETY: loading libcuda runs its initialisers; it is the library cudarc loads
        // (the same name, so the same already-loaded object), and it stays loaded for the
        // life of the process because the handle is leaked below.
        let library = unsafe { libloading::Library::new("libcuda.so") }.ok()?;
        Some(&*Box::leak(Box::new(library)))
    })
}

/// The emulator's fault hooks: `oxide_emu_set_fault` and `oxide_emu_fault_calls`
/// (tools/cuda-emu/src/emu_api.h); `None` on any other driver.
fn hooks() -> Option<(SetFault, FaultCalls)> {
    let library = library()?;
    // SAFETY: emu_api.h: `int oxide_emu_set_fault(const char*)` and
    // `unsigned long long oxide_emu_fault_calls(const char*)`.
    unsafe {
        let set = *library.get::<SetFault>(b"oxide_emu_set_fault\0").ok()?;
        let calls = *library.get::<FaultCalls>(b"oxide_emu_fault_calls\0").ok()?;
        Some((set, calls))
    }
}

/// Arms the fault plan `spec` ("" clears it and any sticky error; the counters restart).
fn arm(set: SetFault, spec: &str) {
    let text = CString::new(spec).unwrap();
    // SAFETY: `text` is a valid NUL-terminated string that outlives the call.
    assert_eq!(
        unsafe { set(text.as_ptr()) },
        0,
        "fault spec {spec:?} refused"
    );
}

/// Calls the site `site` counted since the plan was armed.
fn calls(count: FaultCalls, site: &str) -> u64 {
    let text = CString::new(site).unwrap();
    // SAFETY: `text` is a valid NUL-terminated string that outlives the call.
    unsafe { count(text.as_ptr()) }
}

/// Sticky kernel faults tried per query: a sticky error makes the driver refuse every
/// free until it is cleared, as CUDA does, so each such run leaks the emulator's device
/// memory of that run for the life of the process; past a few dozen runs the emulator
/// runs out of memory mappings.
const STICKY_RUNS: u64 = 16;

/// The calls of `site` that fail, one per run: every one of its `total` calls, except
/// for sticky kernel faults, where [`STICKY_RUNS`] spread evenly over them (the first and
/// the last included).
fn positions(site: &str, total: u64) -> Vec<u64> {
    if site != "kernel" || total <= STICKY_RUNS {
        return (1..=total).collect();
    }
    let mut picked: Vec<u64> = (0..STICKY_RUNS)
        .map(|i| 1 + i * (total - 1) / (STICKY_RUNS - 1))
        .collect();
    picked.dedup();
    picked
}

/// Counts every panic in `count` while it lives, and gives the previous hook back when
/// dropped (an assertion that fails midway included).
struct PanicCounter {
    previous: std::sync::Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync>,
}

impl PanicCounter {
    fn install(count: &'static std::sync::atomic::AtomicUsize) -> Self {
        let previous: std::sync::Arc<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync> =
            std::sync::Arc::from(std::panic::take_hook());
        let chained = std::sync::Arc::clone(&previous);
        std::panic::set_hook(Box::new(move |info| {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            chained(info);
        }));
        Self { previous }
    }
}

impl Drop for PanicCounter {
    fn drop(&mut self) {
        let previous = std::sync::Arc::clone(&self.previous);
        std::panic::set_hook(Box::new(move |info| previous(info)));
    }
}

/// One run's answer and whether a device failure was counted in it.
struct Run {
    rows: Vec<Vec<Option<String>>>,
    counted: bool,
}

async fn run(session: &oxidelake_runtime::OxideSession, statements: &[String]) -> Run {
    let mut rows = Vec::new();
    let mut counted = false;
    for (i, statement) in statements.iter().enumerate() {
        let mut stream = session.sql_stream(statement).await.unwrap();
        let batches = stream
            .collect()
            .await
            .unwrap_or_else(|e| panic!("a device fault failed the query: {e}"));
        let replayed = stream
            .plan()
            .map_or(0, |plan| metric_sum(plan, |_| true, "device_errors"));
        counted |= stream.reran_on_cpu() || replayed > 0;
        if statements.len() == 1 || i == 1 {
            rows = cells(&batches);
        }
    }
    Run { rows, counted }
}

fn assert_duckdbs(
    query: i32,
    spec: &str,
    ours: &[Vec<Option<String>>],
    theirs: &[Vec<Option<String>>],
) {
    assert_eq!(
        ours.len(),
        theirs.len(),
        "Q{query} with fault {spec}: {} rows here, {} in DuckDB",
        ours.len(),
        theirs.len()
    );
    for (row, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!(
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| cell_equal(x, y)),
            "Q{query} with fault {spec}, row {row}: {a:?} here, {b:?} in DuckDB"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the emulated CUDA driver and DuckDB: scripts/test-cuda-emulated.sh"]
async fn every_device_fault_in_resident_tpch_q3_and_q18_still_gives_duckdbs_answer_and_is_counted()
{
    let Some((set, count)) = hooks() else {
        eprintln!("skipping: libcuda is not the emulated driver (no oxide_emu_fault_calls)");
        return;
    };
    let python_path = std::env::var("OXIDE_DUCKDB_PYTHONPATH")
        .expect("OXIDE_DUCKDB_PYTHONPATH names the folder holding the duckdb package");
    let (dir, session) = tpch_lake(SF).await;
    // Every panic, on any thread (DataFusion's spawned tasks included), is counted: a
    // device fault must never make one.
    static PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let _hook = PanicCounter::install(&PANICS);
    for query in [3, 18] {
        let statements = tpch_query(query, SF).unwrap();
        let theirs = duckdb_rows(&python_path, dir.path(), &statements);
        let plan = session.physical_plan(&statements[0]).await.unwrap();
        let text = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(false)
            .to_string();
        assert!(
            text.contains("HostToDeviceExec"),
            "Q{query} crosses to the device explicitly:\n{text}"
        );
        // A fault-free run to warm the backend's pools (the backend is process-wide, so
        // later runs reuse its parked allocations), then one that counts the calls each
        // site sees, as the faulted runs will.
        arm(set, "");
        run(&session, &statements).await;
        arm(set, "");
        let clean = run(&session, &statements).await;
        assert_duckdbs(query, "none", &clean.rows, &theirs);
        assert!(
            !clean.counted,
            "Q{query}: no device failure without a fault"
        );
        let seen: Vec<u64> = SITES.iter().map(|site| calls(count, site)).collect();
        for (site, &total) in SITES.iter().zip(&seen) {
            assert!(total > 0, "Q{query} makes no {site} call on the device");
            let (mut struck, mut counted) = (0u64, 0u64);
            let positions = positions(site, total);
            for &n in &positions {
                let spec = format!("{site}:{n}");
                arm(set, &spec);
                let faulted = run(&session, &statements).await;
                let reached = calls(count, site) >= n;
                arm(set, "");
                assert_duckdbs(query, &spec, &faulted.rows, &theirs);
                // A fault-free run, so that what a fault left in the process-wide
                // backend's pools (a parked stream or buffer of a context that saw a
                // sticky error) is flushed before the next fault; its answer too.
                let after = run(&session, &statements).await;
                assert_duckdbs(query, &format!("none, after {spec}"), &after.rows, &theirs);
                if reached {
                    struck += 1;
                    counted += u64::from(faulted.counted);
                }
            }
            let runs = positions.len() as u64;
            println!(
                "device faults: Q{query} {site}: {total} calls, {runs} runs, {struck} struck, \
                 {counted} counted, every answer DuckDB's"
            );
            assert!(
                struck * 10 >= runs * 9,
                "Q{query} {site}: only {struck} of {runs} runs reached their faulted call"
            );
            assert_eq!(
                counted, struck,
                "Q{query} {site}: a fault that struck was not counted as a device failure"
            );
        }
        arm(set, "oom");
        let starved = run(&session, &statements).await;
        arm(set, "");
        assert_duckdbs(query, "oom", &starved.rows, &theirs);
        assert!(
            starved.counted,
            "Q{query}: out of device memory was not counted"
        );
        println!("device faults: Q{query} out of device memory: DuckDB's answer, counted");
    }
    assert_eq!(
        PANICS.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a device fault made a thread panic (see the messages above)"
    );
}
