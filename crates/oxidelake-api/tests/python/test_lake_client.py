"""`oxidelake.LakeClient` from Python: an INSERT with a file commits a row whose
DataLocation reads back verified; bad statements, missing files and tampered objects are
exceptions with a kind; gc keeps what a committed row references and deletes old orphans.

Run by .ci/run after `pip install` of the freshly built wheel; OXIDE_BIN is the `oxide`
binary of the same build (used to check that the CLI sees what Python committed).
"""

import datetime
import hashlib
import os
import pathlib
import subprocess

import pytest

import oxidelake

OXIDE = os.environ.get("OXIDE_BIN", "oxide")
TABLE = "robots.episodes"
INSERT = f"INSERT INTO {TABLE} (id, note, episode) VALUES (?, ?, ?)"


@pytest.fixture()
def lake(tmp_path):
    client = oxidelake.LakeClient(tmp_path / "lake")
    assert client.create_table(TABLE, "id:int64!, note:utf8, episode:file") == 0
    return client


@pytest.fixture()
def episode(tmp_path):
    path = tmp_path / "ep42.mcap"
    path.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    return path


def test_an_insert_with_a_file_commits_a_row_whose_location_reads_back_verified(lake, episode):
    data = episode.read_bytes()
    outcome = lake.execute(INSERT, [42, "first run", oxidelake.File(episode)])
    assert outcome.version == 1
    [location] = outcome.locations
    assert location.size == len(data)
    assert location.sha256 == hashlib.sha256(data).hexdigest()

    rows = lake.sql(f"SELECT id, note, episode FROM {TABLE}").to_arrow().to_pylist()
    assert len(rows) == 1
    assert rows[0]["id"] == 42 and rows[0]["note"] == "first run"
    # The FILE column's value (a dict) opens as well as the returned DataLocation does.
    assert rows[0]["episode"] == location.to_dict()
    with lake.open(rows[0]["episode"]) as f:
        assert f.read(10) == data[:10]
        assert f.read() == data[10:]
        assert f.read() == b""
    assert f.closed
    with lake.open(location) as f:
        assert f.readall() == data

    # The CLI reads the same lake: the table is at the version the INSERT returned.
    listed = subprocess.run([OXIDE, "table", "--data-dir", str(lake.data_dir), "list"],
                            check=True, capture_output=True, text=True).stdout
    assert f"{TABLE}\tversion 1" in listed


def test_parameters_of_every_kind_are_typed_by_their_columns(tmp_path, episode):
    client = oxidelake.LakeClient(tmp_path / "lake")
    client.create_table("t.kinds", "i:int64, f:float64, s:utf8, b:bool, file:file")
    client.execute("INSERT INTO t.kinds (i, f, s, b, file) VALUES (?, ?, ?, ?, ?)",
                   [-7, 2.5, "ü", True, oxidelake.File(str(episode), mime="application/x-mcap")])
    client.execute("INSERT INTO t.kinds (i, f, s, b, file) VALUES (?, ?, ?, ?, ?)",
                   [None, None, None, None, None])
    rows = client.sql("SELECT i, f, s, b, file FROM t.kinds ORDER BY i NULLS LAST").to_arrow().to_pylist()
    assert rows[0]["i"] == -7 and rows[0]["f"] == 2.5 and rows[0]["s"] == "ü" and rows[0]["b"] is True
    assert rows[0]["file"]["mime"] == "application/x-mcap"
    assert rows[1] == {"i": None, "f": None, "s": None, "b": None, "file": None}


def test_a_statement_outside_the_insert_grammar_raises_with_kind_sql(lake):
    with pytest.raises(oxidelake.OxideLakeError) as err:
        lake.execute(f"DELETE FROM {TABLE} WHERE id = ?", [1])
    assert err.value.kind == "sql"


def test_a_parameter_of_the_wrong_type_raises_before_any_upload(lake, episode):
    with pytest.raises(oxidelake.OxideLakeError) as err:
        lake.execute(INSERT, ["forty-two", "x", oxidelake.File(episode)])
    assert err.value.kind == "type_mismatch"
    with pytest.raises(TypeError, match="oxidelake.File"):
        lake.execute(INSERT, [1, "x", pathlib.Path(episode)])
    assert lake.sql(f"SELECT COUNT(*) AS n FROM {TABLE}").to_arrow().to_pylist() == [{"n": 0}]
    objects = pathlib.Path(lake.data_dir) / "objects"
    assert [p for p in objects.rglob("*") if p.is_file()] == []


def test_a_missing_file_raises_not_found_and_commits_nothing(lake, tmp_path):
    with pytest.raises(oxidelake.OxideLakeError) as err:
        lake.execute(INSERT, [1, "x", oxidelake.File(tmp_path / "no-such.mcap")])
    assert err.value.kind == "not_found"
    assert "no-such.mcap" in str(err.value)
    assert lake.sql(f"SELECT COUNT(*) AS n FROM {TABLE}").to_arrow().to_pylist() == [{"n": 0}]


def test_a_tampered_object_raises_corrupt_object_before_any_byte_is_returned(lake, episode):
    [location] = lake.execute(INSERT, [1, "x", oxidelake.File(episode)]).locations
    stored = pathlib.Path(lake.data_dir) / location.uri
    stored.chmod(0o644)
    with open(stored, "r+b") as f:
        f.seek(1000)
        f.write(b"\x00" * 8 if f.read(8) != b"\x00" * 8 else b"\x01" * 8)
    with pytest.raises(oxidelake.OxideLakeError) as err:
        lake.open(location)
    assert err.value.kind == "corrupt_object"


def test_gc_keeps_referenced_objects_and_deletes_old_orphans(lake, episode):
    [location] = lake.execute(INSERT, [1, "x", oxidelake.File(episode)]).locations
    # An orphan: an object in the store's layout that no row references, two days old.
    orphan = b"left behind by a crashed writer"
    digest = hashlib.sha256(orphan).hexdigest()
    path = pathlib.Path(lake.data_dir) / "objects" / "sha256" / digest[:2] / digest[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orphan)
    two_days_ago = path.stat().st_mtime - 2 * 24 * 3600
    os.utime(path, (two_days_ago, two_days_ago))

    report = lake.gc(datetime.timedelta(hours=24))
    assert report["deleted"] == 1 and report["referenced"] == 1
    assert not path.exists()
    with lake.open(location) as f:
        assert f.read() == episode.read_bytes()
    # A number is hours.
    assert lake.gc(24)["deleted"] == 0


def test_gc_refuses_a_retention_below_the_floor_unless_told(lake):
    with pytest.raises(oxidelake.OxideLakeError) as err:
        lake.gc(datetime.timedelta(minutes=5))
    assert err.value.kind == "invalid_retention"
    assert lake.gc(datetime.timedelta(0), allow_below_floor=True)["deleted"] == 0
