#!/usr/bin/env bash
# Benchmark of ManagedObjectStore::put_file against `cp` + `sha256sum` of the same file
# on the same disk, with peak RSS. Results go into docs/benchmarks.md.
#
#   bash scripts/bench_put.sh [size-in-MiB]      (default 1024)
set -euo pipefail
size_mib=${1:-1024}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/oxidelake/target}
# The workspace's test build (dependencies at opt-level 1, our crates at 0): the same
# artifacts as `cargo test --workspace`, so nothing is rebuilt for the benchmark.
cargo build --workspace --all-targets >/dev/null 2>&1
bin="$CARGO_TARGET_DIR/debug/examples/put_file"
work=$(mktemp -d "${BENCH_DIR:-$PWD}/.bench-put.XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
src="$work/source.bin"
head -c "$((size_mib * 1024 * 1024))" /dev/urandom > "$src"
sync
echo "file: $size_mib MiB on $(df -T "$work" | awk 'NR==2 {print $2}')"
for run in 1 2 3; do
  rm -rf "$work/data" "$work/copy.bin"
  /usr/bin/time -f "put_file: %e s wall, peak RSS %M KiB" "$bin" "$src" "$work/data"
  /usr/bin/time -f "cp + sha256sum: %e s wall (cp), peak RSS %M KiB" cp "$src" "$work/copy.bin"
  /usr/bin/time -f "  sha256sum: %e s wall, peak RSS %M KiB" sha256sum "$work/copy.bin" >/dev/null
  sync
done
