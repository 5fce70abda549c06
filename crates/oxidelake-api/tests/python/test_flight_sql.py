"""Arrow Flight SQL on `oxide-scheduler --flight-sql`, from a real client: ADBC's Flight
SQL driver (adbc-driver-flightsql from PyPI) runs TPC-H Q1 and Q6 at SF 0.01 on a
scheduler placing for cuda and a worker, started as processes, and gets the rows an
embedded session computes; EXPLAIN shows the placement, and OxideLake's functions
resolve.

Run by .ci/run after `pip install` of the freshly built wheel; OXIDE_BIN is the `oxide`
binary of the same build, with `oxide-scheduler` and `oxide-worker` beside it.
"""

import math
import os
import pathlib
import subprocess

import adbc_driver_flightsql.dbapi as flight_sql
from adbc_driver_flightsql import DatabaseOptions
import pytest

import oxidelake
from local_cluster import start_cluster

FLIGHT_SQL_SCHEDULER = ["--flight-sql", "--placement", "cuda"]

OXIDE = os.environ.get("OXIDE_BIN", "oxide")
SCRIPTS = pathlib.Path(__file__).resolve().parents[4] / "scripts"

# TPC-H Q1 and Q6 with the specification's validation parameters (clause 2.4.x.4).
Q1 = """
select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,
       sum(l_extendedprice) as sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
       avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price,
       avg(l_discount) as avg_disc, count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus
"""
Q6 = """
select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '1994-01-01'
  and l_shipdate < date '1994-01-01' + interval '1' year
  and l_discount between 0.06 - 0.01 and 0.06 + 0.01
  and l_quantity < 24
"""


@pytest.fixture(scope="module")
def tpch(tmp_path_factory):
    path = tmp_path_factory.mktemp("tpch")
    subprocess.run([OXIDE, "gen-data", "--tpch", "--scale-factor", "0.01", "--out", str(path)],
                   check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def flight_sql_url(tmp_path_factory):
    """`oxide-scheduler --flight-sql --placement cuda` and one worker (without a GPU the
    worker runs the GPU operators' CPU paths)."""
    work_dir = tmp_path_factory.mktemp("worker")
    work_dir.chmod(0o700)  # the worker refuses a shuffle directory others can read
    with start_cluster(work_dir, FLIGHT_SQL_SCHEDULER) as port:
        yield f"grpc://127.0.0.1:{port}"


def make_certs(directory, *names):
    """A CA and member certificates (DNS:localhost, IP:127.0.0.1) from the project's
    scripts/make-cluster-certs.sh, the way docs/cluster.md tells users to make them."""
    for name in ("", *names):
        subprocess.run(["bash", str(SCRIPTS / "make-cluster-certs.sh"), str(directory),
                        *([name] if name else [])], check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """The same cluster with mutual TLS; yields the port and the certificate folder,
    which holds a client certificate `alice` of the cluster's CA."""
    certs = tmp_path_factory.mktemp("certs")
    make_certs(certs, "member", "alice")
    args = lambda name: ["--tls-ca", str(certs / "ca.pem"), "--tls-cert",
                         str(certs / f"{name}.pem"), "--tls-key", str(certs / f"{name}.key")]
    work_dir = tmp_path_factory.mktemp("tls-worker")
    work_dir.chmod(0o700)
    # The scheduler and the worker share one certificate (both run on 127.0.0.1).
    with start_cluster(work_dir, FLIGHT_SQL_SCHEDULER, args("member")) as port:
        yield port, certs


def embedded_rows(tpch, query):
    session = oxidelake.Session.local()
    session.register_parquet("lineitem", str(tpch / "lineitem"))
    return session.sql(query).to_arrow().to_pylist()


def flight_sql_rows(url, tpch, query, db_kwargs=None):
    with flight_sql.connect(url, db_kwargs=db_kwargs, autocommit=True) as conn, \
            conn.cursor() as cur:
        # Flight SQL sessions have their own catalog: the client registers its tables.
        cur.execute(f"CREATE EXTERNAL TABLE IF NOT EXISTS lineitem STORED AS PARQUET "
                    f"LOCATION '{tpch / 'lineitem'}/'")
        cur.fetch_arrow_table()
        cur.execute(query)
        return cur.fetch_arrow_table().to_pylist()


def assert_rows_equal(got, expected):
    assert len(got) == len(expected) > 0
    for g, e in zip(got, expected):
        assert g.keys() == e.keys()
        for key in e:
            if isinstance(e[key], float):
                # Partial sums meet in another order on the cluster.
                assert math.isclose(g[key], e[key], rel_tol=1e-9), key
            else:
                assert g[key] == e[key], key


@pytest.mark.parametrize("name,query", [("q1", Q1), ("q6", Q6)])
def test_adbc_flight_sql_runs_tpch_on_the_cluster_with_the_embedded_answer(
        tpch, flight_sql_url, name, query):
    expected = embedded_rows(tpch, query)
    got = flight_sql_rows(flight_sql_url, tpch, query)
    assert_rows_equal(got, expected)
    if name == "q1":
        assert sum(row["count_order"] for row in got) > 50_000


def test_explain_over_flight_sql_shows_the_schedulers_placement(tpch, flight_sql_url):
    with flight_sql.connect(flight_sql_url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE EXTERNAL TABLE IF NOT EXISTS lineitem STORED AS PARQUET "
                    f"LOCATION '{tpch / 'lineitem'}/'")
        cur.fetch_arrow_table()
        cur.execute(f"EXPLAIN {Q6}")
        plans = {row["plan_type"]: row["plan"] for row in cur.fetch_arrow_table().to_pylist()}
    assert "GpuFilterExec[cuda]" in plans["distributed_plan"]


def test_a_bad_statement_over_flight_sql_raises_with_the_engines_message(flight_sql_url):
    with flight_sql.connect(flight_sql_url, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(Exception, match="no_such_table"):
            cur.execute("SELECT * FROM no_such_table")


def test_oxidelakes_own_functions_resolve_in_flight_sql_sessions(flight_sql_url):
    query = "SELECT l2_distance(make_array(0.0, 3.0), make_array(4.0, 0.0)) AS d"
    with flight_sql.connect(flight_sql_url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(query)
        got = cur.fetch_arrow_table().to_pylist()
    assert got == oxidelake.Session.local().sql(query).to_arrow().to_pylist() == [{"d": 5.0}]


def tls_options(certs, client):
    options = {DatabaseOptions.TLS_ROOT_CERTS.value: (certs / "ca.pem").read_text()}
    if client:
        options[DatabaseOptions.MTLS_CERT_CHAIN.value] = (certs / f"{client}.pem").read_text()
        options[DatabaseOptions.MTLS_PRIVATE_KEY.value] = (certs / f"{client}.key").read_text()
    return options


def test_flight_sql_over_mutual_tls_answers_a_client_with_a_member_certificate(
        tpch, tls_cluster):
    port, certs = tls_cluster
    got = flight_sql_rows(f"grpc+tls://127.0.0.1:{port}", tpch, Q6, tls_options(certs, "alice"))
    assert_rows_equal(got, embedded_rows(tpch, Q6))


def test_flight_sql_over_mutual_tls_refuses_a_client_without_a_certificate(tls_cluster):
    port, certs = tls_cluster
    with pytest.raises(Exception) as refused:
        with flight_sql.connect(f"grpc+tls://127.0.0.1:{port}",
                                db_kwargs=tls_options(certs, None), autocommit=True) as conn, \
                conn.cursor() as cur:
            cur.execute("SELECT 1")
    # The TLS handshake itself refuses it, before any SQL is read. In TLS 1.3 the client's
    # side of the handshake ends before the server has checked the (missing) certificate,
    # so the client may already be writing its request when the server's alert and close
    # arrive: it then reports the closed connection instead of the alert. Either way the
    # transport failed (gRPC Unavailable), not the statement.
    message = str(refused.value)
    alert = "tls: certificate required" in message
    closed = "Unavailable" in message and any(
        cause in message for cause in ("broken pipe", "connection reset", "EOF"))
    assert alert or closed, message
