#!/usr/bin/env python3
"""Runs SQL statements with DuckDB over a folder of Parquet datasets; prints the rows of
the last statement that returns rows, as JSON (one list of cell strings per row).

Usage: duckdb_query.py DATA_DIR SQL_FILE

Each subfolder of DATA_DIR holding .parquet files becomes a view of that name (as
`oxide --data DIR` registers them), so the same SQL runs on both engines. Decimals are
printed exactly, dates as ISO dates, floats with repr(); NULL is null. The TPC-H oracle
test (crates/oxidelake-runtime/tests/runtime/tpch_oracle.rs) is the caller.
"""
import json
import os
import sys

import duckdb


def main() -> int:
    data_dir, sql_file = sys.argv[1], sys.argv[2]
    con = duckdb.connect()
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        if os.path.isdir(path) and any(f.endswith(".parquet") for f in os.listdir(path)):
            con.execute(
                f"CREATE VIEW \"{name}\" AS SELECT * FROM read_parquet('{path}/*.parquet')"
            )
    statements = [s.strip() for s in open(sql_file).read().split(";\n") if s.strip()]
    rows = None
    for statement in statements:
        result = con.execute(statement)
        if result.description is not None:
            fetched = result.fetchall()
            if not statement.lower().startswith(("create", "drop")):
                rows = fetched
    out = [[None if v is None else str(v) for v in row] for row in rows or []]
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
