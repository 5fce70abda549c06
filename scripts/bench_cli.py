#!/usr/bin/env python3
"""The `oxide` command line's fixed costs: how long a process takes to start, answer
trivial statements and exit, and what each further statement adds.

    scripts/bench_cli.py [--oxide PATH] [--data DIR] [--runs 21]

Cases, each run `--runs` times (medians reported, the cases interleaved run by run so
that a slow stretch of the machine falls on all of them):
- `oxide --version`: the process alone (argument parsing, no session);
- `oxide sql -c 'SELECT 1'`: a session, one statement, its table printed;
- the same with 22 `-c 'SELECT 1'`: the cost of a statement beyond the first is the
  difference divided by 21 (a user piping TPC-H's 22 statements pays it 22 times);
- with `--data DIR` (default the TPC-H SF 1 lake of scripts/bench_tpch.py, when it
  exists): the same two, with every table of the lake registered, and one and 22
  `SELECT count(*) FROM nation` (planned through every rule, one small file read).

`oxide` is --oxide, else OXIDE_BIN, else `oxide` on PATH. Use an optimised build
(`cargo build --profile fast -p oxidelake-cli --features cuda`): a dev build's times say
little. docs/benchmarks.md has results and the command that made them.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("OXIDE_CACHE_DIR", Path.home() / ".cache" / "oxidelake"))
STATEMENTS = 22


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oxide", default=os.environ.get("OXIDE_BIN") or shutil.which("oxide"))
    parser.add_argument("--data", type=Path, default=CACHE / "tpch-sf1")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    if not args.oxide:
        parser.error("no oxide binary: pass --oxide or set OXIDE_BIN")
    oxide = [args.oxide]
    one = ["-c", "SELECT 1"]
    cases = {
        "version": oxide + ["--version"],
        "one statement": oxide + ["sql"] + one,
        f"{STATEMENTS} statements": oxide + ["sql"] + one * STATEMENTS,
    }
    if (args.data / "lineitem").exists():
        lake = oxide + ["sql", "--data", str(args.data)]
        nation = ["-c", "SELECT count(*) FROM nation"]
        cases["one statement, lake registered"] = lake + one
        cases[f"{STATEMENTS} statements, lake registered"] = lake + one * STATEMENTS
        # A statement planned through every rule and reading a file: the smallest table.
        cases["one scan, lake registered"] = lake + nation
        cases[f"{STATEMENTS} scans, lake registered"] = lake + nation * STATEMENTS
    times = {name: [] for name in cases}
    for name, command in cases.items():  # warm the page cache once
        timed(command)
    for _ in range(args.runs):
        for name, command in cases.items():
            times[name].append(timed(command))
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"`{args.oxide}`, median of {args.runs} runs per case, cases interleaved\n")
    print("| case | median | min | max |")
    print("|---|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {median[name] * 1e3:.1f} ms | {min(t) * 1e3:.1f} ms "
              f"| {max(t) * 1e3:.1f} ms |")
    print()
    for what, suffix in (("statement", ""), ("statement", ", lake registered"),
                         ("scan", ", lake registered")):
        first, many = f"one {what}{suffix}", f"{STATEMENTS} {what}s{suffix}"
        if first in median:
            each = (median[many] - median[first]) / (STATEMENTS - 1)
            print(f"- a {what} beyond the first{suffix}: {each * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
