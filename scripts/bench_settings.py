#!/usr/bin/env python3
"""Session settings of OxideLake compared on TPC-H in one process, interleaved.

    scripts/bench_settings.py --wheel dist/oxidelake-*.whl \\
        --variant base= \\
        --variant ours=oxidelake.placement.cpu_operators=all \\
        [--placement cpu] [--sf 1] [--rounds 5] [--threads 2] [--queries 1,6,18]

Each `--variant NAME=SETTINGS` is a set of `key=value` settings joined by `;` (empty for
the session's defaults). One session runs every variant: per round and per query, each
variant's settings are applied and the query runs once, the variants' order turning
from round to round. The first round is a warm-up and is not counted. The report is
the median per query and variant, each variant's ratio to the first, and the geometric
mean of those ratios.

Why not `bench_tpch.py`: that harness starts one process per engine, one after the
other, and on a shared machine the speed drifts between them by more than most
changes are worth (two runs of it an hour apart differed by 1.5x on the same build).
Interleaving in one process puts the variants under the same conditions.

The wheel, the venv and the TPC-H lake are `bench_tpch.py`'s (same cache).
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_tpch  # noqa: E402  (the shared venv, lake and query files)


def parse_variant(text: str) -> tuple[str, list[tuple[str, str]]]:
    name, _, settings = text.partition("=")
    pairs = []
    for item in filter(None, (s.strip() for s in settings.split(";"))):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--variant {text!r}: {item!r} is not key=value")
        pairs.append((key.strip(), value.strip()))
    return name, pairs


def run_variants(args, picked: list[int]) -> dict:
    import oxidelake
    variants = [parse_variant(v) for v in args.variant]
    session = oxidelake.Session.local(placement=args.placement)
    session.set("datafusion.execution.target_partitions", str(args.threads))
    for table in bench_tpch.TABLES:
        session.register_parquet(table, str(args.lake / table))
    # Every key any variant sets, with the session's value before any variant ran, so
    # that a variant without a key runs with the default.
    defaults = {}
    for _, pairs in variants:
        for key, _ in pairs:
            defaults.setdefault(key, session.sql(f"SHOW {key}").to_arrow().column(1)[0].as_py())
    times = {name: {q: [] for q in picked} for name, _ in variants}
    rows = {name: {} for name, _ in variants}
    for round_no in range(args.rounds + 1):
        turn = round_no % len(variants)
        order = variants[turn:] + variants[:turn]
        for query in picked:
            sqls = bench_tpch.statements(args.query_dir / f"q{query:02d}.sql")
            for name, pairs in order:
                settings = dict(defaults)
                settings.update(pairs)
                for key, value in settings.items():
                    session.set(key, value)
                started = time.perf_counter()
                counts = [session.sql(sql).to_arrow().num_rows for sql in sqls]
                elapsed = time.perf_counter() - started
                rows[name][str(query)] = counts[-1] if counts else None
                if round_no > 0:
                    times[name][query].append(elapsed)
        print(f"round {round_no} done", file=sys.stderr)
    return {"label": f"oxidelake ({oxidelake.build_profile} build)",
            "variants": [name for name, _ in variants],
            "settings": {name: pairs for name, pairs in variants},
            "median_s": {name: {str(q): statistics.median(times[name][q]) for q in picked}
                         for name, _ in variants},
            "rows": rows}


def report(result: dict, picked: list[int], args) -> str:
    names = result["variants"]
    base = names[0]
    med = result["median_s"]
    lines = [f"TPC-H SF {args.sf:g}, {args.threads} threads, placement {args.placement}, "
             f"one process, variants interleaved, median of {args.rounds} rounds after one "
             f"warm-up round ({result['label']})", ""]
    for name in names:
        pairs = result["settings"][name]
        lines.append(f"- {name}: " + ("; ".join(f"`{k} = {v}`" for k, v in pairs)
                                       or "the session's defaults"))
    lines.append("")
    ratios = names[1:]
    lines.append("| query | " + " | ".join(names) + " | "
                 + " | ".join(f"{n} / {base}" for n in ratios) + " |")
    lines.append("|---" * (1 + len(names) + len(ratios)) + "|")
    mismatches = []
    for q in picked:
        counts = {result["rows"][n].get(str(q)) for n in names}
        if len(counts) > 1:
            mismatches.append(f"Q{q}")
        cells = [f"{med[n][str(q)] * 1e3:.0f} ms" for n in names]
        cells += [f"{med[n][str(q)] / med[base][str(q)]:.2f}×" for n in ratios]
        lines.append(f"| Q{q} | " + " | ".join(cells) + " |")
    totals = [f"**{sum(med[n].values()):.2f} s**" for n in names]
    means = [f"**{bench_tpch.geomean([med[n][str(q)] / med[base][str(q)] for q in picked]):.3f}×**"
             for n in ratios]
    lines.append("| sum / geomean | " + " | ".join(totals) + " | " + " | ".join(means) + " |")
    if mismatches:
        lines += ["", "Row counts differ between variants: " + ", ".join(mismatches)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="the oxidelake wheel to measure")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=key=value;key=value (repeatable; the first is the base)")
    parser.add_argument("--placement", default="cpu")
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", default="1-22", help="e.g. 1,6,18 (default all 22)")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--lake", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--query-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if len(args.variant) < 2:
        parser.error("give at least two --variant")
    picked = (list(range(1, 23)) if args.queries == "1-22"
              else [int(q) for q in args.queries.split(",")])
    if args.run:
        json.dump(run_variants(args, picked), sys.stdout)
        return 0
    if not args.wheel:
        parser.error("--wheel is required (maturin build -m crates/oxidelake-api/Cargo.toml)")
    python = bench_tpch.bench_venv(args.wheel)
    lake, queries = bench_tpch.tpch_lake(args.sf)
    command = [str(python), __file__, "--run", "--lake", str(lake), "--query-dir", str(queries),
               "--placement", args.placement, "--sf", f"{args.sf:g}", "--rounds",
               str(args.rounds), "--threads", str(args.threads), "--queries", args.queries]
    for variant in args.variant:
        command += ["--variant", variant]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    result = json.loads(done.stdout)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(report(result, picked, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
