#!/usr/bin/env bash
# Runs OxideLake's CUDA path on the emulated CUDA driver (tools/cuda-emu): the real
# cudarc host code and the real .cu kernels (compiled for the host) execute on the CPU.
#
#   1. builds the emulator (normal + ThreadSanitizer) and runs its self-test against both:
#      every kernel of the five .cu files against a C++ reference, stream/event ordering,
#      fault injection; the TSan run catches races on shared and global memory;
#   2. runs every #[ignore]d CUDA test of the workspace (pinned memory, device round
#      trips, null count, the operator conformance suite, the data path: scan batches
#      gathered, a host batch crossing with only the columns its operator reads, device
#      batches between transitions; fault injection: a failed
#      allocation, launch, copy, module load, a sticky kernel fault, out of memory) with
#      the `cuda` feature, the emulator as libcuda and the real NVRTC; then the detector
#      with the emulator but without libnvrtc;
#   3. runs the differential test with OXIDE_BACKEND=cuda: GPU-placed plans executed by
#      CudaBackend against the CPU plans; TPC-H Q18 at SF 0.1 under a small device limit,
#      its spilling joins' pairs joined on CudaBackend; TPC-H Q6, Q1, Q3 and Q5 with their
#      GPU operators working on the batches between the device transitions, each scan
#      crossing the bus once in and the results once out; the device budget over every
#      GPU operator; then the 22 TPC-H queries at SF 0.01, placed for cuda and run on
#      CudaBackend, against DuckDB (installed from PyPI into the cache), and 1000 queries
#      of the differential fuzzer with the GPU operators on CudaBackend (a quarter of them
#      over ±0.0, NaN, ±inf and integer and decimal extremes). Plans placed for cuda keep
#      their batches on the device between transitions (the only device path, issue #45),
#      so every one of these runs exercises it; and fault injection at every device
#      allocation, copy and launch of TPC-H Q3 and Q18 and at 16 of their kernels (one
#      fault per run, then the device out of memory): DuckDB's answer each time, the
#      failure counted, no thread panicking;
#   4. prints `emulated launches: <kernel>=<count> ...` summed over every process, and
#      fails if any kernel never ran.
#
# Needs g++ and python3 (pip, for the NVRTC wheel). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/oxidelake/target}"
CACHE_DIR="${OXIDE_CACHE_DIR:-$HOME/.cache/oxidelake}"
EMU_DIR="$PWD/target-emu"
LOG_DIR="$(mktemp -d)"
trap 'rm -rf "$LOG_DIR"' EXIT

echo "== emulator: build and self-test (normal and ThreadSanitizer builds)"
tools/cuda-emu/build.sh --test

nvrtc_dir="$CACHE_DIR/nvrtc"
if ! ls "$nvrtc_dir"/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$nvrtc_dir" "nvidia-cuda-nvrtc-cu12>=12.8,<13"
fi
export LD_LIBRARY_PATH="$EMU_DIR:$nvrtc_dir/nvidia/cuda_nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OXIDE_CUDA_EMU_REPORT=1
export OXIDE_REQUIRE_NVRTC=1
# The cargo feature set: `cuda` at least. .ci/run passes the set of its other feature
# steps (OXIDE_CI_FEATURES) so that our crates are not compiled once more for this script.
FEATURES="${OXIDE_CI_FEATURES:-oxidelake-runtime/cuda}"

echo "== ignored CUDA tests on the emulated driver"
# The fault plan is process-wide: the fault-injection tests run on their own, after the
# rest, so that no other test's kernels consume (or suffer) an armed fault.
# Only the targets that hold CUDA tests (the libraries' unit tests, the compute suite):
# building every test binary of the workspace with the feature costs minutes more.
cargo test --workspace --features "$FEATURES" --lib --test compute \
  -- --ignored --nocapture --skip faults --skip compute::pipeline \
  2>&1 | tee "$LOG_DIR/ignored.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "ignored CUDA tests failed (exit $rc)"; exit "$rc"; }

echo "== data path: gathered batches, host batches crossing with only the columns read, device transitions"
# The stream trace and the allocation counters are process-wide: one test at a time.
cargo test --workspace --features "$FEATURES" --test compute -- --ignored --nocapture \
  --test-threads 1 compute::pipeline \
  2>&1 | tee "$LOG_DIR/pipeline.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "data-path tests failed (exit $rc)"; exit "$rc"; }
grep -q "test result: ok. 18 passed" "$LOG_DIR/pipeline.log" || { echo "expected 18 data-path tests"; exit 1; }

echo "== fault injection: each fault falls back to the CPU with the same rows, or is a typed error"
cargo test --workspace --features "$FEATURES" --test compute -- --ignored --nocapture faults \
  2>&1 | tee "$LOG_DIR/faults.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "fault-injection tests failed (exit $rc)"; exit "$rc"; }
grep -q "test result: ok. 6 passed" "$LOG_DIR/faults.log" || { echo "expected 6 fault tests"; exit 1; }

echo "== no libnvrtc: the CUDA backend is refused with the reason, auto-detection picks the CPU"
LD_LIBRARY_PATH="$EMU_DIR" OXIDE_EXPECT_NO_NVRTC=1 cargo test --workspace \
  --features "$FEATURES" --lib -- --ignored --exact \
  detector::tests::a_gpu_without_nvrtc_is_refused_with_the_reason_and_auto_detection_picks_the_cpu

echo "== differential test, OXIDE_BACKEND=cuda (GPU-placed plans on CudaBackend)"
OXIDE_BACKEND=cuda cargo test --workspace --features "$FEATURES" --test runtime \
  -- --nocapture differential 2>&1 | tee "$LOG_DIR/differential.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "differential test on the emulated driver failed (exit $rc)"; exit "$rc"; }

echo "== spilling joins under a device limit: TPC-H Q18's pairs joined on CudaBackend"
OXIDE_BACKEND=cuda cargo test --workspace --features "$FEATURES" --test runtime \
  -- --nocapture tpch_q18_under_a_small_device_limit 2>&1 | tee "$LOG_DIR/device_limit.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "the device-limit test on the emulated driver failed (exit $rc)"; exit "$rc"; }
grep -q "^test result: ok. 1 passed" "$LOG_DIR/device_limit.log" \
  || { echo "the device-limit test did not run"; exit 1; }
# The pairs' joins ran on the emulated device, not on the GPU join's CPU path.
grep -Eq "^emulated launches:.* join_build=[1-9]" "$LOG_DIR/device_limit.log" \
  || { echo "no join_build launch in the device-limit test"; exit 1; }

echo "== device transitions: TPC-H Q6, Q1, Q3 and Q5 with their filters, products, partial aggregates and joins in place on CudaBackend, each scan across the bus once in and the results once out"
# One test at a time: one of them reads the process-wide transfer totals.
OXIDE_BACKEND=cuda cargo test --workspace --features "$FEATURES" --test runtime \
  -- --nocapture --test-threads 1 device_transitions 2>&1 | tee "$LOG_DIR/resident.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "the device-transition tests on the emulated driver failed (exit $rc)"; exit "$rc"; }
grep -q "^test result: ok. 4 passed" "$LOG_DIR/resident.log" \
  || { echo "expected 4 device-transition tests"; exit 1; }

echo "== the device budget over every GPU operator: TPC-H Q1 and Q3 under a 64 KiB device limit on CudaBackend"
# One test at a time: it reads the process-wide device budget.
OXIDE_BACKEND=cuda cargo test --workspace --features "$FEATURES" --test runtime \
  -- --nocapture --test-threads 1 device_budget 2>&1 | tee "$LOG_DIR/device_budget.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "the device-budget test on the emulated driver failed (exit $rc)"; exit "$rc"; }
grep -q "^test result: ok. 1 passed" "$LOG_DIR/device_budget.log" \
  || { echo "the device-budget test did not run"; exit 1; }
# Refusals happened on the device backend (the CPU backend claims nothing).
grep -Eq "^device budget: Q1: [1-9][0-9]* batches refused" "$LOG_DIR/device_budget.log" \
  || { echo "no batch refused by the device budget on the emulated driver"; exit 1; }

echo "== TPC-H SF 0.01, all 22 queries placed for cuda on CudaBackend, against DuckDB"
duckdb_dir="${OXIDE_DUCKDB_PYTHONPATH:-$CACHE_DIR/duckdb}"
if ! PYTHONPATH="$duckdb_dir" python3 -c "import duckdb" >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$duckdb_dir" "duckdb==2.0.1"
fi
OXIDE_BACKEND=cuda OXIDE_TPCH_SF=0.01 OXIDE_DUCKDB_PYTHONPATH="$duckdb_dir" \
  cargo test --workspace --features "$FEATURES" --test runtime \
  -- --ignored --nocapture tpch_oracle::all_22_tpch_queries_placed_for_cuda 2>&1 | tee "$LOG_DIR/tpch.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "TPC-H on the emulated driver failed (exit $rc)"; exit "$rc"; }

echo "== device faults: every allocation, copy and launch of TPC-H Q3 and Q18, and 16 of their kernels, fail in a run of their own"
# One fault plan at a time (the plan is process-wide): one test, its runs in sequence.
OXIDE_BACKEND=cuda OXIDE_DUCKDB_PYTHONPATH="$duckdb_dir" \
  cargo test --workspace --features "$FEATURES" --test runtime \
  -- --ignored --nocapture --test-threads 1 device_faults 2>&1 | tee "$LOG_DIR/device_faults.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "the device-fault campaign failed (exit $rc)"; exit "$rc"; }
grep -q "^test result: ok. 1 passed" "$LOG_DIR/device_faults.log" \
  || { echo "the device-fault campaign did not run"; exit 1; }
grep -q "^device faults: Q18 out of device memory" "$LOG_DIR/device_faults.log" \
  || { echo "the device-fault campaign did not reach Q18"; exit 1; }

echo "== differential fuzzer on CudaBackend: 1000 random queries, placed for cpu vs for cuda"
OXIDE_BACKEND=cuda OXIDE_FUZZ_QUERIES=1000 cargo test --workspace --features "$FEATURES" \
  --test runtime -- --nocapture fuzz 2>&1 | tee "$LOG_DIR/fuzz.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "the fuzzer on the emulated driver failed (exit $rc)"; exit "$rc"; }
# A quarter of the queries read the edge tables (±0.0, NaN, ±inf, integer and decimal
# extremes); the test itself fails if one of those value classes never came up.
grep -q "^fuzz value classes: " "$LOG_DIR/fuzz.log" \
  || { echo "the fuzzer did not report its value classes"; exit 1; }

# Sum the per-process reports and require every kernel to have run.
python3 - "$LOG_DIR"/ignored.log "$LOG_DIR"/pipeline.log "$LOG_DIR"/differential.log \
  "$LOG_DIR"/device_limit.log "$LOG_DIR"/resident.log "$LOG_DIR"/tpch.log "$LOG_DIR"/fuzz.log <<'EOF'
import re, sys
counts = {}
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        if line.startswith("emulated launches:"):
            for name, n in re.findall(r"(\w+)=(\d+)", line):
                counts[name] = counts.get(name, 0) + int(n)
print("emulated launches: " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
groups = {
    "null count": ["count_unset_bits"],
    "filter": ["eval_predicates", "count_flags", "exclusive_scan_blocks", "compact_rows"],
    "computed columns": ["eval_values"],
    "narrow uploads": ["widen_images"],
    "device-resident filter": ["gather_8byte", "gather_bits", "gather_string_lengths",
                               "gather_string_bytes"],
    "device-resident projection": ["pack_bits"],
    "device-resident aggregate": ["agg_assign_groups_rows", "agg_slot_flags", "agg_group_rows",
                                  "agg_compact_words"],
    "device-resident semi and anti joins": ["join_match_flags"],
    "join build": ["join_build"],
    "join probe": ["join_probe_count", "join_probe_write"],
    "join row numbers (the host edge's probe)": ["join_row_images"],
    "vector distance": ["l2_distance"],
}
missing = [g for g, names in groups.items() if not all(counts.get(n, 0) > 0 for n in names)]
if missing:
    print("no emulated launch for: " + ", ".join(missing))
    sys.exit(1)
EOF
echo "cuda on the emulated driver: passed"
