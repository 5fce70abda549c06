#!/usr/bin/env python3
"""TPC-H side by side: OxideLake (placed for the CPU and for CUDA), datafusion-python
and DuckDB on the same Parquet files, the same queries and the same thread count.

    scripts/bench_tpch.py --wheel dist/oxidelake-*.whl [--sf 1] [--runs 5] [--threads 2]
                          [--queries 1,6,18] [--engines oxide-cpu,oxide-cpu:projection]
                          [--json results.json]

What it does:
- makes (once) a venv under ~/.cache/oxidelake/bench-venv with pinned DuckDB,
  datafusion-python and pyarrow from PyPI, and installs the given `oxidelake` wheel
  into it (the wheel's build profile is printed: a dev wheel is several times slower
  than a release wheel, and only a release wheel gives numbers worth comparing);
- generates the TPC-H Parquet lake at the scale factor with `oxide gen-data --tpch`
  (once, into ~/.cache/oxidelake/tpch-sf<SF>) and writes the 22 queries with the
  specification's validation parameters (`oxide gen-data --queries`);
- runs each engine in a process of its own, all of them started at once and driven
  in turn: per query, one warm-up in every engine, then round after round one timed
  run in every engine, the engines' order rotating by one each round. The engines are
  thus interleaved per query and round, and a machine that slows down for a while
  (this one is noisy) slows every engine alike instead of whichever ran then. A run
  is every statement of the query (Q15 is three) with its result collected as Arrow;
- checks that the engines return the same number of rows per query, and prints a
  Markdown table of medians with the ratios to DuckDB and to datafusion-python and
  their geometric means.

Besides the four engines, `oxide-cpu:KINDS` is OxideLake placed for the CPU with
`oxidelake.placement.cpu_operators = KINDS` (kinds joined by `+`, e.g.
`oxide-cpu:filter+projection`, or `all`): our operators' CPU paths for those kinds. Its
ratio to plain `oxide-cpu` is reported too.

`oxide` (for gen-data) is OXIDE_BIN, else `oxide` on PATH, else the debug build in
CARGO_TARGET_DIR. docs/benchmarks.md has results and the command that made them.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PEERS = ["duckdb==2.0.1", "datafusion==55.0.0", "pyarrow==26.0.1"]
ENGINES = ["oxide-cpu", "oxide-cuda", "datafusion", "duckdb"]
TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
CACHE = Path(os.environ.get("OXIDE_CACHE_DIR", Path.home() / ".cache" / "oxidelake"))


def oxide_bin() -> str:
    if os.environ.get("OXIDE_BIN"):
        return os.environ["OXIDE_BIN"]
    if shutil.which("oxide"):
        return shutil.which("oxide")
    target = os.environ.get("CARGO_TARGET_DIR", str(CACHE / "target"))
    return str(Path(target) / "debug" / "oxide")


def bench_venv(wheel: Path) -> Path:
    venv = CACHE / "bench-venv"
    python = venv / "bin" / "python"
    stamp = venv / "peers.txt"
    if not stamp.exists() or stamp.read_text() != "\n".join(PEERS):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", *PEERS], check=True)
        stamp.write_text("\n".join(PEERS))
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--force-reinstall", "--no-deps", str(wheel)], check=True)
    return python


def tpch_lake(sf: float) -> tuple[Path, Path]:
    lake = CACHE / f"tpch-sf{sf:g}"
    queries = CACHE / f"tpch-sf{sf:g}-queries"
    if not (lake / "lineitem").exists():
        print(f"generating TPC-H SF {sf:g} into {lake} (once)", file=sys.stderr)
        partial = lake.with_name(lake.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run([oxide_bin(), "gen-data", "--tpch", "--scale-factor", f"{sf:g}",
                        "--out", str(partial)], check=True)
        partial.rename(lake)
    subprocess.run([oxide_bin(), "gen-data", "--tpch", "--scale-factor", f"{sf:g}",
                    "--queries", str(queries)], check=True, capture_output=True)
    return lake, queries


def statements(path: Path) -> list[str]:
    return [s.strip() for s in path.read_text().split(";\n") if s.strip()]


# ---- one engine, in its own process ------------------------------------------------

def open_engine(engine: str, lake: Path, threads: int):
    """Returns run(sql) -> rows (or None for a statement without rows) and a label."""
    if engine.startswith("oxide-"):
        import oxidelake
        placement, _, kinds = engine.removeprefix("oxide-").partition(":")
        session = oxidelake.Session.local(placement=placement)
        session.set("datafusion.execution.target_partitions", str(threads))
        if kinds:
            session.set("oxidelake.placement.cpu_operators", kinds.replace("+", ","))
        for table in TABLES:
            session.register_parquet(table, str(lake / table))
        label = f"oxidelake ({oxidelake.build_profile} build)"
        return (lambda sql: session.sql(sql).to_arrow().num_rows), label
    if engine == "datafusion":
        import datafusion
        config = datafusion.SessionConfig().with_target_partitions(threads)
        ctx = datafusion.SessionContext(config)
        for table in TABLES:
            ctx.register_parquet(table, str(lake / table))
        return (lambda sql: ctx.sql(sql).to_arrow_table().num_rows), \
            f"datafusion-python {datafusion.__version__}"
    if engine == "duckdb":
        import duckdb
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        for table in TABLES:
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{lake / table}/*.parquet')")

        def run(sql):
            # A relation straight to Arrow (a DB-API result's Arrow output copies the
            # rows once more, DuckDB warns); None for a statement without rows.
            relation = con.sql(sql)
            return None if relation is None else relation.to_arrow_table().num_rows
        return run, f"duckdb {duckdb.__version__}"
    raise SystemExit(f"unknown engine {engine}")


def serve_engine(engine: str, lake: Path, queries: Path, threads: int) -> None:
    """The engine's side of the driver's protocol, one JSON object a line each way:
    after `{"label": ...}`, each line `{"query": N}` on stdin is answered with the
    query's `{"elapsed_s": ..., "rows": ...}` or `{"error": ...}`; EOF ends it."""
    run, label = open_engine(engine, lake, threads)
    print(json.dumps({"label": label}), flush=True)
    for line in sys.stdin:
        query = json.loads(line)["query"]
        sqls = statements(queries / f"q{query:02d}.sql")
        try:
            started = time.perf_counter()
            rows = [run(sql) for sql in sqls]
            elapsed = time.perf_counter() - started
            # The answer's rows: those of the query's SELECT (Q15 also creates and
            # drops a view, which some engines answer with an empty table).
            answers = [r for sql, r in zip(sqls, rows)
                       if r is not None and not sql.lower().startswith(("create", "drop"))]
            reply = {"elapsed_s": elapsed, "rows": answers[-1]}
        except Exception as e:  # noqa: BLE001 - reported per query, the run goes on
            reply = {"error": str(e).splitlines()[0][:200]}
        print(json.dumps(reply), flush=True)


class Engine:
    """One engine's process, serving queries on request (`serve_engine`)."""

    def __init__(self, python: Path, engine: str, lake: Path, queries: Path, threads: int):
        self.name = engine
        self.process = subprocess.Popen(
            [str(python), __file__, "--serve-engine", engine, "--lake", str(lake),
             "--query-dir", str(queries), "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.label = self.reply()["label"]

    def reply(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name} stopped (exit {self.process.wait()})")
        return json.loads(line)

    def run(self, query: int) -> dict:
        self.process.stdin.write(json.dumps({"query": query}) + "\n")
        self.process.stdin.flush()
        return self.reply()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def run_interleaved(engines: list, picked: list[int], runs: int) -> dict:
    """Per query: a warm-up in every engine, then `runs` rounds of one timed run in
    every engine, the order rotating each round. An engine whose run fails is out of
    that query, with its error."""
    results = {e.name: {"engine": e.name, "label": e.label, "queries": {}} for e in engines}
    for query in picked:
        failed = {}
        times = {e.name: [] for e in engines}
        rows = {}
        for r in range(-1, runs):  # round -1 is the warm-up
            shift = max(r, 0) % len(engines)
            for e in engines[shift:] + engines[:shift]:
                if e.name in failed:
                    continue
                got = e.run(query)
                if "error" in got:
                    failed[e.name] = got
                elif r >= 0:
                    times[e.name].append(got["elapsed_s"])
                    rows[e.name] = got["rows"]
        for e in engines:
            results[e.name]["queries"][str(query)] = failed.get(e.name) or {
                "median_s": statistics.median(times[e.name]), "rows": rows[e.name],
                "times_s": times[e.name]}
        print(f"Q{query}: " + ", ".join(
            f"{e.name} " + ("error" if e.name in failed
                            else f"{statistics.median(times[e.name]) * 1e3:.0f} ms")
            for e in engines), file=sys.stderr)
    return results


# ---- the report --------------------------------------------------------------------

def is_cpu_variant(engine: str) -> bool:
    """`oxide-cpu:KINDS`: placed for the CPU with some of our operators' CPU paths."""
    return engine.startswith("oxide-cpu:") and len(engine) > len("oxide-cpu:")


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def report(results: dict, picked: list[int], sf: float, threads: int, runs: int) -> str:
    engines = [e for e in ENGINES if e in results] + sorted(
        e for e in results if is_cpu_variant(e))
    med = {e: {q: results[e]["queries"].get(str(q), {}).get("median_s") for q in picked}
           for e in engines}
    lines = [f"TPC-H SF {sf:g}, {threads} threads, median of {runs} timed runs after one "
             f"warm-up, one process per engine, the engines interleaved per query and "
             f"round", ""]
    for e in engines:
        lines.append(f"- {e}: {results[e]['label']}")
    lines.append("")
    ratios = [(o, p) for o in ("oxide-cpu", "oxide-cuda") if o in engines
              for p in ("duckdb", "datafusion") if p in engines]
    if "oxide-cpu" in engines and "oxide-cuda" in engines:
        ratios.append(("oxide-cuda", "oxide-cpu"))
    if "oxide-cpu" in engines:
        ratios += [(e, "oxide-cpu") for e in engines if is_cpu_variant(e)]
    lines.append("| query | " + " | ".join(engines) + " | "
                 + " | ".join(f"{o} / {p}" for o, p in ratios) + " |")
    lines.append("|---" * (1 + len(engines) + len(ratios)) + "|")
    fmt = lambda s: "error" if s is None else f"{s * 1e3:.0f} ms"
    mismatches = []
    for q in picked:
        rows = {results[e]["queries"].get(str(q), {}).get("rows") for e in engines}
        if len(rows - {None}) > 1:
            mismatches.append(f"Q{q}: " + ", ".join(
                f"{e}={results[e]['queries'][str(q)].get('rows')}" for e in engines))
        cells = [fmt(med[e][q]) for e in engines]
        cells += [f"{med[o][q] / med[p][q]:.2f}×" if med[o][q] and med[p][q] else "–"
                  for o, p in ratios]
        lines.append(f"| Q{q} | " + " | ".join(cells) + " |")
    totals = [f"**{sum(v for v in med[e].values() if v):.2f} s**" for e in engines]
    means = [f"**{geomean([med[o][q] / med[p][q] for q in picked if med[o][q] and med[p][q]]):.2f}×** (geomean)"
             for o, p in ratios]
    lines.append("| sum / geomean | " + " | ".join(totals) + " | " + " | ".join(means) + " |")
    if mismatches:
        lines += ["", "Row counts differ: " + "; ".join(mismatches)]
    errors = [f"{e} Q{q}: {results[e]['queries'][str(q)]['error']}" for e in engines
              for q in picked if "error" in results[e]["queries"].get(str(q), {})]
    if errors:
        lines += ["", "Errors: " + "; ".join(errors)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="the oxidelake wheel to measure")
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", default="1-22", help="e.g. 1,6,18 (default all 22)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    # Internal: serve one engine in this (the venv's) interpreter (`serve_engine`).
    parser.add_argument("--serve-engine", help=argparse.SUPPRESS)
    parser.add_argument("--lake", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--query-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    picked = (list(range(1, 23)) if args.queries == "1-22"
              else [int(q) for q in args.queries.split(",")])
    if args.serve_engine:
        serve_engine(args.serve_engine, args.lake, args.query_dir, args.threads)
        return 0
    if not args.wheel:
        parser.error("--wheel is required (maturin build -m crates/oxidelake-api/Cargo.toml)")
    python = bench_venv(args.wheel)
    lake, queries = tpch_lake(args.sf)
    names = args.engines.split(",")
    for engine in names:
        if engine not in ENGINES and not is_cpu_variant(engine):
            parser.error(f"unknown engine {engine}: one of {', '.join(ENGINES)}, "
                         "or oxide-cpu:KINDS")
    engines = [Engine(python, e, lake, queries, args.threads) for e in names]
    try:
        results = run_interleaved(engines, picked, args.runs)
    finally:
        for e in engines:
            e.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(report(results, picked, args.sf, args.threads, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
