"""The `oxidelake` wheel from Python: results equal `oxide sql`'s, pyarrow reads the
engine's buffers without a copy, errors are exceptions with a kind, Ctrl-C cancels.

Run by .ci/run after `pip install` of the freshly built wheel into a venv; OXIDE_BIN is
the `oxide` binary of the same build (it generates the data and gives the reference
answers).
"""

import csv
import io
import os
import signal
import subprocess
import sys
import threading
import time
import _thread

import pyarrow as pa
import pytest

import oxidelake
from local_cluster import start_cluster

OXIDE = os.environ.get("OXIDE_BIN", "oxide")
ROWS = 100_000
QUERY = "SELECT k, SUM(v) AS s, COUNT(*) AS n FROM t GROUP BY k ORDER BY k"


def oxide(*args):
    out = subprocess.run([OXIDE, *args], check=True, capture_output=True, text=True)
    return out.stdout


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    path = tmp_path_factory.mktemp("lake")
    oxide("gen-data", "--rows", str(ROWS), "--out", str(path))
    return path


@pytest.fixture()
def session(lake):
    s = oxidelake.Session.local()
    s.register_parquet("t", str(lake / "t"))
    return s


def test_sql_results_equal_those_of_oxide_sql(lake, session):
    expected = list(csv.DictReader(io.StringIO(
        oxide("sql", "--format", "csv", "--data", str(lake), "-c", QUERY))))
    table = session.sql(QUERY).to_arrow()
    assert table.column_names == ["k", "s", "n"]
    got = [{name: str(value) for name, value in row.items()} for row in table.to_pylist()]
    assert got == expected
    assert sum(int(row["n"]) for row in got) == ROWS


def test_to_arrow_shares_the_engines_buffers(session):
    frame = session.sql("SELECT id FROM t WHERE id % 2 = 0")
    table = frame.to_arrow()
    engine = frame._first_column_buffer_addresses()
    # buffers()[0] is the validity bitmap (None without NULLs), [1] the values.
    arrow = [chunk.buffers()[1].address for chunk in table.column(0).chunks]
    assert engine and arrow == engine
    assert len(frame) == table.num_rows == ROWS // 2


def test_pyarrow_reads_the_capsule_stream_directly(session):
    frame = session.sql("SELECT k, v FROM t WHERE id < 10")
    reader = pa.RecordBatchReader.from_stream(frame)
    assert reader.read_all().num_rows == 10
    assert pa.table(frame).num_rows == 10


def test_to_pandas_has_the_columns_and_rows(session):
    pandas = pytest.importorskip("pandas")
    df = session.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k ORDER BY k").to_pandas()
    assert isinstance(df, pandas.DataFrame)
    assert list(df.columns) == ["k", "n"]
    assert int(df["n"].sum()) == ROWS


def test_an_empty_result_keeps_its_schema(session):
    table = session.sql("SELECT k, v FROM t WHERE id < 0").to_arrow()
    assert table.num_rows == 0
    assert table.column_names == ["k", "v"]


def test_a_bad_statement_raises_with_its_kind(session):
    with pytest.raises(oxidelake.OxideLakeError) as raised:
        session.sql("SELEC 1")
    assert raised.value.kind == "sql"
    with pytest.raises(oxidelake.OxideLakeError) as raised:
        session.sql("SELECT * FROM no_such_table")
    assert raised.value.kind == "plan"
    assert "no_such_table" in str(raised.value)


def test_a_missing_parquet_file_raises_with_kind_not_found(session, tmp_path):
    with pytest.raises(oxidelake.OxideLakeError) as raised:
        session.register_parquet("gone", str(tmp_path / "missing.parquet"))
        session.sql("SELECT * FROM gone")
    assert raised.value.kind == "not_found"
    assert "missing.parquet" in str(raised.value)


def test_explain_shows_where_operators_run(lake):
    s = oxidelake.Session.local(placement="cuda")
    s.register_parquet("t", str(lake / "t"))
    plan = s.explain("SELECT k, SUM(v) FROM t WHERE v < 10 GROUP BY k")
    assert "GpuFilterExec[cuda]" in plan
    s.set("oxidelake.placement.target", "cpu")
    assert "GpuFilterExec" not in s.explain("SELECT k FROM t WHERE v < 10")


@pytest.fixture()
def sigint_raises():
    """Python's own SIGINT handler, whatever this process inherited: a process started
    in the background of a non-interactive shell (as CI runs) ignores SIGINT, and then
    `_thread.interrupt_main` does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_cancels_a_running_query_and_the_session_stays_usable(session, sigint_raises):
    # 16 billion rows: about 20 s here if nothing cancels it.
    slow = ("SELECT SUM(a.value * b.value) FROM generate_series(1, 400000) AS a, "
            "generate_series(1, 40000) AS b")
    threading.Timer(0.5, _thread.interrupt_main).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        session.sql(slow)
    assert time.monotonic() - started < 5
    assert len(session.sql("SELECT 1 AS one")) == 1


@pytest.fixture()
def cluster(tmp_path):
    """A scheduler and one worker as processes on ephemeral local ports; killed after."""
    with start_cluster(tmp_path, scheduler_args=["--placement", "cpu"]) as port:
        yield f"df://127.0.0.1:{port}"


def test_a_cluster_session_returns_the_rows_of_an_embedded_one(lake, session, cluster):
    remote = oxidelake.Session.connect(cluster)
    remote.register_parquet("t", str(lake / "t"))
    assert remote.sql(QUERY).to_arrow().to_pylist() == session.sql(QUERY).to_arrow().to_pylist()


def test_set_refuses_a_key_that_is_not_an_option_name(session):
    with pytest.raises(oxidelake.OxideLakeError) as raised:
        session.set("x = 1; DROP TABLE t; SET y", "2")
    assert raised.value.kind == "invalid_argument"


def test_a_backend_forced_by_oxide_backend_that_cannot_start_raises_instead_of_running_on_the_cpu():
    # CUDA cannot start where the driver is missing (a machine with one has nothing
    # unavailable to force). A fresh interpreter: the detector reads the variable once
    # per process.
    # Probed as the engine loads it (dlopen, so LD_LIBRARY_PATH counts).
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has a CUDA driver, so forcing CUDA starts")
    except OSError:
        pass
    code = (
        "import oxidelake\n"
        "try:\n"
        "    oxidelake.Session.local()\n"
        "except oxidelake.OxideLakeError as e:\n"
        "    print(e.kind, '|', e)\n"
        "else:\n"
        "    print('no error')\n"
    )
    env = dict(os.environ, OXIDE_BACKEND="cuda")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.startswith("backend_unavailable |"), out
    assert "backend cuda is not available" in out, out
    # Unset, the same machine starts a session.
    env.pop("OXIDE_BACKEND")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "no error", out
