#!/usr/bin/env bash
# Builds the emulated CUDA driver (libcuda.so.1 + libcuda.so) from tools/cuda-emu/src and
# the kernels in crates/oxidelake-device/kernels/cuda, with plain g++.
#
#   build.sh [OUT_DIR]          normal build      (default OUT_DIR: <repo>/target-emu)
#   build.sh --tsan [OUT_DIR]   ThreadSanitizer   (default OUT_DIR: <repo>/target-emu/tsan)
#   build.sh --test             both builds, then the self-test against each
#
# Point cudarc at the result with LD_LIBRARY_PATH=<OUT_DIR> (it dlopens "libcuda.so" first).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
KERNELS="$REPO/crates/oxidelake-device/kernels/cuda"
CXX="${CXX:-g++}"
CXXFLAGS=(-std=c++17 -O1 -g -fPIC -pthread -fvisibility=hidden -Wall -Wextra -Werror)

build() {  # build OUT_DIR [extra flags...]
    local out="$1"; shift
    local objs="$out/obj"
    mkdir -p "$objs"
    local jobs; jobs="$(nproc 2>/dev/null || echo 2)"
    # One object per source file, in parallel; each line of xargs compiles one file.
    ls "$HERE"/src/*.cpp | xargs -P "$jobs" -I{} sh -c \
        'f="$1"; shift; o="$1"; shift; exec "$@" -c "$f" -o "$o/$(basename "$f" .cpp).o"' \
        _ {} "$objs" "$CXX" "${CXXFLAGS[@]}" "$@" -I"$HERE/src" -I"$KERNELS"
    "$CXX" "${CXXFLAGS[@]}" "$@" -shared -Wl,-soname,libcuda.so.1 -Wl,--version-script="$HERE/src/exports.map" -o "$out/libcuda.so.1" "$objs"/*.o
    ln -sf libcuda.so.1 "$out/libcuda.so"
    echo "built $out/libcuda.so.1"
}

build_selftest() {  # build_selftest OUT_DIR [extra flags...]
    local out="$1"; shift
    "$CXX" -std=c++17 -O1 -g -pthread -Wall -Wextra -Werror "$@" -I"$HERE/src" \
        "$HERE/selftest.cpp" -o "$out/selftest" -ldl
}

case "${1:-}" in
--tsan)
    build "${2:-$REPO/target-emu/tsan}" -fsanitize=thread
    ;;
--test)
    normal="$REPO/target-emu"
    tsan="$REPO/target-emu/tsan"
    build "$normal"
    build "$tsan" -fsanitize=thread
    build_selftest "$normal"
    build_selftest "$tsan" -fsanitize=thread
    echo "== selftest (normal build)"
    "$normal/selftest" "$normal/libcuda.so.1"
    echo "== selftest (ThreadSanitizer build)"
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
        "$tsan/selftest" "$tsan/libcuda.so.1" --tsan
    ;;
-*)
    echo "usage: build.sh [--tsan|--test] [OUT_DIR]" >&2
    exit 2
    ;;
*)
    build "${1:-$REPO/target-emu}"
    ;;
esac
