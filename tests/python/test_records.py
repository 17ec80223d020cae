"""kiln.records: query, export and import a tuning database."""

import json
import os

import pytest

import kiln


@pytest.fixture(scope="module")
def tuned_db(tiny, tmp_path_factory):
    db = str(tmp_path_factory.mktemp("records") / "tuning.db")
    # The search's records only: no in-graph step (test_tune.py covers it).
    kiln.tune(tiny[0], db, trials=2, batch=2, tuner="random", in_graph=0)
    return db


def test_query(tuned_db):
    # tiny's 4 tasks (two direct convolutions, the Winograd alternative of the
    # 3x3 stride-1 one, the dense layer), 2 trials each.
    db = kiln.records.open(tuned_db)
    assert len(db) == 8
    assert db.targets() == [kiln.records.target_key()]
    workloads = db.workloads()
    assert len(workloads) == 4
    for w in workloads:
        rs = db.records(w)
        assert len(rs) == 2 and all(r.workload == w for r in rs)
        best = db.best(w)
        assert best is not None and best.error == "ok" and best.mean_ms > 0
        assert best.mean_ms == min(r.mean_ms for r in rs if r.error == "ok")
        assert isinstance(best.config, dict)
    assert db.best("conv2d_NCHWc.x86(nothing)") is None
    assert {r.workload for r in db.best_records()} == set(workloads)


def test_export_import_round_trip(tuned_db, tmp_path):
    db = kiln.records.open(tuned_db)
    out = tmp_path / "all.jsonl"
    assert db.export(out) == 8
    lines = out.read_text().splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["workload"]
    copy = kiln.records.open(tmp_path / "copy.db", create=True)
    assert copy.import_(out) == 8 and len(copy) == 8
    assert copy.import_(out) == 0  # duplicates are skipped
    best = tmp_path / "best.jsonl"
    n = db.export(best, best=True)
    assert 4 <= n <= 8 and len(best.read_text().splitlines()) == n
    one = db.workloads()[0]
    assert db.export(tmp_path / "one.jsonl", workload=one) == 2


def test_errors(tuned_db, tmp_path):
    with pytest.raises(kiln.KilnError, match="missing.db"):
        kiln.records.open(tmp_path / "missing.db")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"workload": "x"}\n')
    db = kiln.records.open(tmp_path / "new.db", create=True)
    with pytest.raises(kiln.KilnError, match="bad.jsonl:1"):
        db.import_(bad)
    assert len(db) == 0
    src = kiln.records.open(tuned_db)
    with pytest.raises(kiln.KilnError, match="refusing to overwrite"):
        src.export(tuned_db)
    with pytest.raises(kiln.KilnError, match="refusing to overwrite"):
        src.export(tuned_db, best=True)
    assert len(kiln.records.open(tuned_db)) == 8
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(kiln.KilnError, match="garbage.db"):
        kiln.records.open(garbage)


# ---- found by fuzz/python_api_fuzz.py --------------------------------------------------------

def test_a_database_is_a_regular_file(tmp_path):
    """A directory or FIFO is refused by name; sqlite used to open a device as an empty
    database, write PATH-journal beside it (/dev/null-journal) and fail with "disk I/O error"."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((tmp_path, "a directory"), (fifo, "a FIFO")):
        for create in (False, True):
            with pytest.raises(kiln.KilnError, match=f"is {what}, not a records database"):
                kiln.records.open(path, create=create)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_export_best_follows_a_symlink(tuned_db, tmp_path):
    """export(best=True) wrote a temporary file and renamed it over the path: a symlink
    became a regular file. Now it is written like every output (support/output_file.h)."""
    target, link = tmp_path / "target.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(target)
    n = kiln.records.open(tuned_db).export(link, best=True)
    assert link.is_symlink() and n > 0 and len(target.read_text().splitlines()) == n


def test_a_message_that_is_not_utf8_is_kept(tmp_path):
    """The JSON parser quotes the bytes it read ("last read: '\\xc3'"): the message used
    to become an empty string."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes("\u00e9t\u00e9\n".encode())
    db = kiln.records.open(tmp_path / "a.db", create=True)
    with pytest.raises(kiln.KilnError, match="bad.jsonl:1: not JSON") as e:
        db.import_(bad)
    assert "\\xc3" in str(e.value)


def test_wrong_argument_types_name_the_argument(tuned_db):
    db = kiln.records.open(tuned_db)
    with pytest.raises(TypeError, match="target must be a string or None, not int"):
        db.workloads(5)
    with pytest.raises(TypeError, match="workload must be a string, not NoneType"):
        db.records(None)
    with pytest.raises(TypeError, match="create must be True or False, not str"):
        kiln.records.open(tuned_db, create="yes")
    with pytest.raises(TypeError, match="target must be a string"):
        kiln.records.target_key(5)
