//! A join whose build and probe inputs both hand on device batches (ADR-0014, stage 3):
//! the build side is appended and indexed on the device, the output is gathered from both
//! sides there, and only the transition above the join downloads it.

use std::sync::Arc;

use datafusion::common::JoinType;
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_compute::ops::Predicate;
use oxidelake_compute::{BackendChoice, GpuFilterExec, GpuHashJoinExec};
use oxidelake_core::BackendKind;

use super::{
    BATCH_ROWS, SCAN_ROWS, cuda, dated_filter, emu, emulator_missing, ledger_scan, metric, run,
    traced_ops,
};
use crate::compute::plans::{cpu, download, upload};
use crate::compute::rows::assert_same_rows;

/// `s LIKE '%3%'` over `ledger_scan`, keeping every column (`d` with NULLs, the string
/// `s`, `amount`, `k`): the build side of the join below.
fn build_filter(input: Arc<dyn ExecutionPlan>, backend: BackendChoice) -> Arc<dyn ExecutionPlan> {
    let predicates = vec![Predicate::Like {
        column: 1,
        pattern: "%3%".into(),
        negated: false,
    }];
    Arc::new(
        GpuFilterExec::try_new(input, predicates, vec![0, 1, 2, 3], BackendKind::Cuda)
            .unwrap()
            .with_backend(backend),
    )
}

/// `build.k = probe.k`, outputting the build side's `d` and `s` and the probe side's
/// `amount` and `k`.
fn join(
    build: Arc<dyn ExecutionPlan>,
    probe: Arc<dyn ExecutionPlan>,
    backend: BackendChoice,
) -> Arc<dyn ExecutionPlan> {
    Arc::new(
        GpuHashJoinExec::try_new(build, probe, 3, 2, BackendKind::Cuda)
            .unwrap()
            .with_backend(backend)
            .with_projection(Some(vec![0, 1, 5, 6]))
            .unwrap(),
    )
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_join_of_two_resident_inputs_builds_and_joins_on_the_device_and_downloads_only_its_output()
 {
    if emulator_missing() {
        return;
    }
    let (build_batches, probe_batches) = (10, 40);
    let fixed = BackendChoice::Fixed(cuda());
    let upload =
        |batches: usize| -> Arc<dyn ExecutionPlan> { upload(ledger_scan(batches), &fixed) };
    let build = build_filter(upload(build_batches), fixed.clone());
    let probe = dated_filter(upload(probe_batches), fixed.clone());
    let joined = join(Arc::clone(&build), Arc::clone(&probe), fixed);
    let joined_ref = joined
        .downcast_ref::<GpuHashJoinExec>()
        .expect("a GPU join");
    assert!(
        joined_ref.gives_device_batches(),
        "both inputs are resident"
    );
    let d2h = download(&joined);
    emu::trace(true);
    let ours = run(Arc::clone(&d2h)).await;
    emu::trace(false);
    let cpu = cpu();
    let stock = run(join(
        build_filter(ledger_scan(build_batches), cpu.clone()),
        dated_filter(ledger_scan(probe_batches), cpu.clone()),
        cpu,
    ))
    .await;
    let rows = assert_same_rows("join of two resident inputs", &ours, &stock, 0.0);
    assert!(rows > 1000, "{rows}");
    for (node, name) in [
        (&build, "build filter"),
        (&probe, "probe filter"),
        (&joined, "join"),
    ] {
        assert_eq!(
            metric(node, "refused_batches"),
            0,
            "{name}: no batch via the host"
        );
        assert_eq!(metric(node, "cpu_fallback_batches"), 0, "{name}");
    }
    // The build input's scan batches are gathered to the device batch size: the rows of
    // a batch the filter keeps are an odd number, so every append but the first starts
    // inside a validity byte.
    let build_gathered = (build_batches * SCAN_ROWS).div_ceil(BATCH_ROWS);
    let probe_gathered = (probe_batches * SCAN_ROWS).div_ceil(BATCH_ROWS);
    let count = traced_ops();
    assert_eq!(
        count("launch join_build"),
        1,
        "one table, built on the device"
    );
    assert_eq!(
        count("launch shift_offsets"),
        build_gathered,
        "each build batch's strings appended"
    );
    assert_eq!(
        count("launch append_bits"),
        build_gathered,
        "each build batch's NULLs of d appended"
    );
    assert_eq!(count("launch join_probe_count"), probe_gathered);
    assert_eq!(
        metric(&d2h, "copies"),
        probe_gathered,
        "the joined rows cross once per probe batch"
    );
    // Only keys and sizes come back besides the output: the build side's key column
    // once, and 4-byte readbacks (the filters' kept counts and string byte totals, the
    // probe's pair total, the byte total of each matching batch's build strings).
    let matching = (0..probe_gathered)
        .filter(|b| b * BATCH_ROWS < build_batches * SCAN_ROWS)
        .count();
    assert_eq!(count("launch join_probe_write"), matching);
    assert_eq!(
        count("d2h"),
        2 * build_gathered + 1 + 2 * probe_gathered + matching + probe_gathered,
        "build filter: kept count and string total per batch; the build keys once; per \
         probe batch: the filter's kept count, the pair total and the transition's \
         download; per matching batch: its build strings' total"
    );
}

/// `build.k = probe.k AND build.d = probe.d` (`d` has NULLs, which never match; probe
/// keys beyond the build side's range have no key), as an inner join outputting the
/// build side's `s` and the probe side's `d` and `k`, and as a semi join.
fn two_key_join(
    build: Arc<dyn ExecutionPlan>,
    probe: Arc<dyn ExecutionPlan>,
    join_type: JoinType,
    backend: BackendChoice,
) -> Arc<dyn ExecutionPlan> {
    let projection = match join_type {
        JoinType::Inner => vec![1, 4, 6],
        _ => vec![0, 2],
    };
    Arc::new(
        GpuHashJoinExec::try_new_on(
            build,
            probe,
            vec![(3, 2), (0, 0)],
            None,
            join_type,
            BackendKind::Cuda,
        )
        .unwrap()
        .with_backend(backend)
        .with_projection(Some(projection))
        .unwrap(),
    )
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_join_on_two_integer_keys_combines_them_on_the_device_for_the_build_and_each_probe() {
    if emulator_missing() {
        return;
    }
    let (build_batches, probe_batches) = (10, 40);
    let probe_gathered = (probe_batches * SCAN_ROWS).div_ceil(BATCH_ROWS);
    for join_type in [JoinType::Inner, JoinType::RightSemi] {
        let fixed = BackendChoice::Fixed(cuda());
        let upload =
            |batches: usize| -> Arc<dyn ExecutionPlan> { upload(ledger_scan(batches), &fixed) };
        let joined = two_key_join(
            build_filter(upload(build_batches), fixed.clone()),
            dated_filter(upload(probe_batches), fixed.clone()),
            join_type,
            fixed.clone(),
        );
        let d2h = download(&joined);
        emu::trace(true);
        let ours = run(Arc::clone(&d2h)).await;
        emu::trace(false);
        let cpu = cpu();
        let stock = run(two_key_join(
            build_filter(ledger_scan(build_batches), cpu.clone()),
            dated_filter(ledger_scan(probe_batches), cpu.clone()),
            join_type,
            cpu,
        ))
        .await;
        let rows = assert_same_rows(&format!("two keys, {join_type}"), &ours, &stock, 0.0);
        assert!(rows > 500, "{join_type}: {rows}");
        assert_eq!(metric(&joined, "refused_batches"), 0, "{join_type}");
        assert_eq!(metric(&joined, "cpu_fallback_batches"), 0, "{join_type}");
        let count = traced_ops();
        assert_eq!(count("launch join_build"), 1, "{join_type}");
        assert_eq!(
            count("launch join_radix_keys"),
            1 + probe_gathered,
            "{join_type}: the build side's keys once, then each probe batch's"
        );
    }
}

#[tokio::test]
#[ignore = "needs the emulated CUDA driver: scripts/test-cuda-emulated.sh"]
async fn a_build_side_past_the_device_limit_stays_on_the_host_and_the_join_still_answers() {
    if emulator_missing() {
        return;
    }
    let (build_batches, probe_batches) = (10, 40);
    let probe_gathered = (probe_batches * SCAN_ROWS).div_ceil(BATCH_ROWS);
    let cpu = cpu();
    let stock = run(join(
        build_filter(ledger_scan(build_batches), cpu.clone()),
        dated_filter(ledger_scan(probe_batches), cpu.clone()),
        cpu,
    ))
    .await;
    // Without a session limit a share of the device's memory bounds the side.
    {
        use oxidelake_device::DeviceMemory;
        let backend = cuda();
        let total = backend.memory_info().unwrap().total_bytes as usize;
        assert_eq!(
            oxidelake_compute::default_device_limit(backend.as_ref()),
            Some(total / 100 * oxidelake_compute::DEFAULT_DEVICE_SHARE_PERCENT as usize)
        );
    }
    // (device limit, build sides kept on the host, probe batches refused in place)
    for (limit, on_host, refused) in [(64 << 10, 1, probe_gathered), (256 << 20, 0, 0)] {
        let fixed = BackendChoice::Fixed(cuda());
        let upload =
            |batches: usize| -> Arc<dyn ExecutionPlan> { upload(ledger_scan(batches), &fixed) };
        let joined: Arc<dyn ExecutionPlan> = Arc::new(
            GpuHashJoinExec::try_new(
                build_filter(upload(build_batches), fixed.clone()),
                dated_filter(upload(probe_batches), fixed.clone()),
                3,
                2,
                BackendKind::Cuda,
            )
            .unwrap()
            .with_backend(fixed)
            .with_projection(Some(vec![0, 1, 5, 6]))
            .unwrap()
            .with_device_limit(Some(limit)),
        );
        let d2h = download(&joined);
        let ours = run(Arc::clone(&d2h)).await;
        assert_same_rows(&format!("device limit {limit}"), &ours, &stock, 0.0);
        assert_eq!(
            metric(&joined, "device_budget_host_builds"),
            on_host,
            "limit {limit}"
        );
        assert_eq!(metric(&joined, "refused_batches"), refused, "limit {limit}");
        // Refused, the side takes no device memory: its table is the CPU's, which
        // every probe batch then goes through.
        assert_eq!(
            metric(&joined, "cpu_fallback_batches"),
            refused,
            "limit {limit}"
        );
        drop((d2h, joined));
        assert_eq!(
            oxidelake_compute::DeviceBudget::global().claimed(),
            0,
            "the build side's claim went with it"
        );
    }
}
