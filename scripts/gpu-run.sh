#!/usr/bin/env bash
# Runs on the GPU machine, from the kit scripts/gpu-check.sh built (copied there as
# device-bin/run.sh). Needs only the NVIDIA driver and a CUDA toolkit's libnvrtc; prints
# one log whose summary lines go into STATUS.md. Exits non-zero if any test failed.
set -uo pipefail
cd "$(dirname "$0")"
echo "== kit of commit $(cat COMMIT 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "nvidia-smi: not found"

for f in *.xz; do
  [ -e "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"
done

# cudarc looks for libnvrtc.so (among versioned names); a toolkit may ship only
# libnvrtc.so.<major>. Offer whatever is installed under the plain name.
libs="$PWD/libs"
mkdir -p "$libs"
nvrtc=$(ls /usr/local/cuda*/lib64/libnvrtc.so* /usr/lib/x86_64-linux-gnu/libnvrtc.so* 2>/dev/null \
  | grep -v builtins | head -1 || true)
if [ -n "$nvrtc" ]; then
  ln -sf "$nvrtc" "$libs/libnvrtc.so"
  ln -sf "$nvrtc" "$libs/libnvrtc.so.12"
  export LD_LIBRARY_PATH="$libs:$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "libnvrtc: $nvrtc"
else
  echo "libnvrtc: not found (kernel compilation will be refused)"
fi
if [ -n "${OXIDE_GPU_RUN_EXTRA_LIBS:-}" ]; then
  export LD_LIBRARY_PATH="$OXIDE_GPU_RUN_EXTRA_LIBS:${LD_LIBRARY_PATH:-}"
fi
export OXIDE_REQUIRE_NVRTC=1

failed=0
step() {
  echo "== $*"
  "$@" || { echo "== FAILED: $*"; failed=1; }
}
step ./memory-lib --ignored --nocapture
step ./device-lib --ignored --nocapture
step ./device-lib --nocapture nvrtc
step ./compute-tests --ignored --nocapture conformance
step ./compute-tests --ignored --nocapture faults
step ./compute-tests --ignored --nocapture typed_filters
OXIDE_BACKEND=cuda step ./runtime-tests --nocapture differential
echo "== gpu-run: $([ $failed -eq 0 ] && echo passed || echo FAILED)"
exit $failed
