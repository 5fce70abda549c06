#!/usr/bin/env bash
# The device run kit: the CUDA test binaries, stripped and compressed into device-bin/
# (git-ignored, small enough to carry to a lent GPU machine that has CUDA but no Rust),
# plus device-bin/run.sh, which runs them there.
#
#   scripts/gpu-check.sh build      build the kit here (CPU machine with Rust)
#   bash device-bin/run.sh          on the GPU machine: every CUDA test, one log
#   scripts/gpu-check.sh dry-run    run the kit here against the emulated driver
#
# What runs: the pinned-memory, device round-trip, null-count and NVRTC tests of
# oxidelake-memory / oxidelake-device, the operator conformance suite on the detected GPU
# (400 cases, no CPU fallback allowed), and the differential test with OXIDE_BACKEND=cuda.
# The fault-injection tests skip themselves on a real driver.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/oxidelake/target}"
KIT="$PWD/device-bin"
LIMIT_BYTES=$((60 * 1024 * 1024))

build() {
  rm -rf "$KIT" && mkdir -p "$KIT"
  local json; json=$(mktemp)
  cargo test --workspace --features oxidelake-runtime/cuda --no-run --message-format=json \
    > "$json"
  # The four test binaries the GPU run needs, by target.
  python3 - "$json" "$KIT" <<'EOF'
import json, shutil, sys
wanted = {("oxidelake-memory", "lib"): "memory-lib", ("oxidelake-device", "lib"): "device-lib",
          ("oxidelake-compute", "test"): "compute-tests", ("oxidelake-runtime", "test"): "runtime-tests"}
found = {}
for line in open(sys.argv[1]):
    msg = json.loads(line)
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    pkg = msg["package_id"].split("#")[0].rsplit("/", 1)[-1]
    kind = msg["target"]["kind"][0]
    name = msg["target"]["name"]
    for (p, k), out in wanted.items():
        if pkg.startswith(p) and k == kind and (k == "lib" or name in ("compute", "runtime")):
            found[out] = msg["executable"]
missing = set(wanted.values()) - set(found)
if missing:
    sys.exit(f"test binaries not found: {sorted(missing)}")
for out, exe in found.items():
    shutil.copy(exe, f"{sys.argv[2]}/{out}")
EOF
  rm -f "$json"
  for bin in "$KIT"/*; do
    strip "$bin"
    xz -T0 -6 "$bin"
  done
  cp scripts/gpu-run.sh "$KIT/run.sh"
  git rev-parse HEAD > "$KIT/COMMIT"
  local bytes; bytes=$(du -sb "$KIT" | cut -f1)
  ls -l "$KIT"
  echo "kit: $bytes bytes in $KIT (limit $LIMIT_BYTES)"
  [ "$bytes" -le "$LIMIT_BYTES" ] || { echo "kit too large to carry"; exit 1; }
}

case "${1:-}" in
build) build ;;
dry-run)
  [ -d "$KIT" ] || build
  tools/cuda-emu/build.sh >/dev/null
  nvrtc="${OXIDE_CACHE_DIR:-$HOME/.cache/oxidelake}/nvrtc/nvidia/cuda_nvrtc/lib"
  OXIDE_GPU_RUN_EXTRA_LIBS="$PWD/target-emu:$nvrtc" bash "$KIT/run.sh"
  ;;
*)
  echo "usage: scripts/gpu-check.sh build|dry-run" >&2
  exit 2
  ;;
esac
