#!/usr/bin/env bash
# Where the time of a TPC-H query goes, for the queries slower than DuckDB (issue #46):
# for each query, the plan with each node's own compute time (EXPLAIN ANALYZE) and a
# sampled profile of the hot functions (`perf record`), both from the `profiling` build
# (the `fast` build with its symbols kept, so the functions are named).
#
#   cargo build --profile profiling -p oxidelake-cli     # about 36 min cold on 2 cores
#   scripts/profile_tpch.sh [QUERY ...]                   # default: the ten past 1.5x
#
# Writes OUT/qNN.analyze.txt (the plan as it ran, the query's last run of two) and
# OUT/qNN.perf.txt (the top of `perf report`, self time by library and function, over
# RUNS runs of the query in one process). Settings: SF (1), OUT
# (target/profile-tpch-sfSF), RUNS (3), OXIDE_BIN (the profiling build's `oxide`). The
# lake and the queries are the ones scripts/bench_tpch.py uses
# ($HOME/.cache/oxidelake/tpch-sfSF), generated once. Two partitions, as the benchmark.
set -euo pipefail

cd "$(dirname "$0")/.."
SF="${SF:-1}"
RUNS="${RUNS:-3}"
CACHE="${OXIDE_CACHE_DIR:-$HOME/.cache/oxidelake}"
OXIDE="${OXIDE_BIN:-${CARGO_TARGET_DIR:-$CACHE/target}/profiling/oxide}"
OUT="${OUT:-target/profile-tpch-sf$SF}"
LAKE="$CACHE/tpch-sf$SF"
QUERIES="$CACHE/tpch-sf$SF-queries"
command -v perf >/dev/null || { echo "perf is missing (Debian: apt-get install linux-perf)" >&2; exit 2; }
[ -x "$OXIDE" ] || { echo "no profiling build at $OXIDE: cargo build --profile profiling -p oxidelake-cli" >&2; exit 2; }

if [ ! -d "$LAKE/lineitem" ]; then
  echo "generating TPC-H SF $SF into $LAKE (once)" >&2
  rm -rf "$LAKE.partial"
  "$OXIDE" gen-data --tpch --scale-factor "$SF" --out "$LAKE.partial" >/dev/null
  mv "$LAKE.partial" "$LAKE"
fi
"$OXIDE" gen-data --tpch --scale-factor "$SF" --queries "$QUERIES" >/dev/null
mkdir -p "$OUT"

# The query's statements with its SELECT (Q15's, between its view's CREATE and DROP)
# prefixed by `prefix`.
statements() {
  python3 - "$1" "$2" <<'EOF'
import sys
path, prefix = sys.argv[1], sys.argv[2]
parts = [s.strip() for s in open(path).read().split(";\n") if s.strip()]
out = []
for s in parts:
    s = s.rstrip(";")
    head = s.lstrip().split(None, 1)[0].lower()
    out.append((prefix + s) if head in ("select", "with") else s)
print(";\n".join(out) + ";")
EOF
}

set_partitions="SET datafusion.execution.target_partitions = 2;"
for q in "${@:-1 5 12 6 7 21 19 2 11 17}"; do
  for n in $q; do
    file="$QUERIES/q$(printf %02d "$n").sql"
    name="q$(printf %02d "$n")"
    plain=$(statements "$file" "")
    analyze=$(statements "$file" "EXPLAIN ANALYZE ")
    # Two runs in one process, the second explained: its caches (footers, statistics)
    # are warm, as in the benchmark's timed rounds.
    printf '%s\n%s\n%s\n' "$set_partitions" "$plain" "$analyze" \
      | "$OXIDE" sql --data "$LAKE" --format csv --maxrows inf 2>&1 \
      | sed -n '/plan_type/,$p' > "$OUT/$name.analyze.txt"
    repeated=""
    for _ in $(seq "$RUNS"); do repeated+="$plain"$'\n'; done
    printf '%s\n%s' "$set_partitions" "$repeated" > "$OUT/$name.runs.sql"
    perf record -q -F 499 -o "$OUT/$name.perf.data" -- \
      "$OXIDE" sql --data "$LAKE" --format csv -f "$OUT/$name.runs.sql" >/dev/null 2>&1
    perf report -q -i "$OUT/$name.perf.data" --no-children --sort dso,symbol --stdio \
      --percent-limit 0.7 2>/dev/null | sed 's/[[:space:]]*$//' | grep -v '^$' | head -45 \
      > "$OUT/$name.perf.txt"
    rm -f "$OUT/$name.perf.data" "$OUT/$name.runs.sql"
    echo "$name: $OUT/$name.analyze.txt, $OUT/$name.perf.txt" >&2
  done
done
