"""The read-only reader of build-time lookups (``ktune.db.reader``): the same answers and the same
errors as a read-only ``TuningLog``, over the DB-API alone."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.script import ScriptDirectory

from ktune.db import DatabaseError, JobSpec, LookupQuery, TrialIn, TuningLog
from ktune.db.engine import mask_url, resolve_url
from ktune.db.lookup import shape_distance
from ktune.db.migrate import alembic_config, head_revision
from ktune.db.reader import LogReader, open_read_only, open_reader
from ktune.db.revisions import HEAD_REVISION, REVISIONS
from ktune.db.urls import parse_plain

SHAPES = [(1024, 1024), (4096, 4096), (1024, 4096), (2048, 2048, 2)]


def tuned_log(url: str) -> None:
    """Shapes of ``mm`` (float32) tuned on two devices, one of them still being tuned."""
    with TuningLog.open(url) as log:
        for d, device in enumerate(("A", "B")):
            dev = log.get_or_create_device(device, "vendor", "arch", spec={"sm": 10 + d})
            for i, shape in enumerate(SHAPES):
                key = f"mm/{'x'.join(map(str, shape))}/float32"
                w = log.get_or_create_workload(key, "mm", shape, "float32")
                config = {"tile": i, "device": device}
                trial = TrialIn(config, json.dumps(config), "ok", time_ms=1.0 + i + d)
                log.add_trials(None, w.id, dev.id, "import", [trial])
        w = log.get_workload("mm/1024x1024/float32")
        dev = log.get_device("B")
        assert w is not None and dev is not None
        log.create_job(JobSpec(w.id, dev.id, "replay", "random", 0, 8, 10, None, None))


def _query(shape: tuple[int, ...], device: str) -> LookupQuery:
    key = f"mm/{'x'.join(map(str, shape))}/float32"
    return LookupQuery(key, "mm", shape, "float32", "", device)


def test_the_reader_answers_as_the_log_does(db_url: str) -> None:
    """One SQL text, run by both: every answer and record is the same."""
    tuned_log(db_url)

    def distance(a: str, b: str) -> float | None:
        return {("C", "A"): 1.0, ("C", "B"): 2.0}.get((a, b))

    reader = open_reader(db_url)
    assert isinstance(reader, LogReader)
    with reader, TuningLog.open(db_url, read_only=True) as log:
        assert reader.url == log.url
        for shape in [(1024, 1024), (3000, 3000), (2048, 2048), (7, 7, 7), (2048, 2048, 2)]:
            for device in ("A", "B", "C"):
                for fallback in (True, False):
                    q = _query(shape, device)
                    mine = reader.lookup(q, fallback=fallback, device_distance=distance)
                    theirs = log.lookup(q, fallback=fallback, device_distance=distance)
                    assert mine == theirs, (shape, device, fallback)
        near = reader.lookup(_query((3000, 3000), "A"))
        assert near is not None and near.tier == "nearest_shape"
        assert near.distance == shape_distance((3000, 3000), (4096, 4096))  # exactly
        busy = reader.lookup(_query((1024, 1024), "B"))
        assert busy is not None and busy.tuned.tuning and busy.tuned.updated_at.tzinfo is not None
        assert reader.best() == log.best() and len(reader.best()) == 2 * len(SHAPES)
        assert reader.best("mm/1024x1024/float32", "A") == log.best("mm/1024x1024/float32", "A")
        assert reader.tuned_configs(operator="mm", device="B") == log.tuned_configs(
            operator="mm", device="B"
        )
        assert reader.similar_devices("C", "mm", "float32", "", distance) == [
            (1.0, "A"),
            (2.0, "B"),
        ]
        assert reader.operator_ranks("mm") == log.operator_ranks("mm") == {2, 3}
        assert reader.get_device("A") == log.get_device("A") and reader.get_device("Z") is None
        assert reader.list_devices() == log.list_devices()


def test_the_reader_sees_what_a_writer_commits_later(db_url: str) -> None:
    tuned_log(db_url)
    with open_read_only(db_url) as reader, TuningLog.open(db_url) as writer:
        assert reader.lookup(_query((512, 512), "A")) is not None  # nearest: 1024x1024
        w = writer.get_or_create_workload("mm/512x512/float32", "mm", (512, 512), "float32")
        dev = writer.get_device("A")
        assert dev is not None
        writer.add_trials(None, w.id, dev.id, "import", [TrialIn({"tile": 9}, "9", "ok", 0.5)])
        hit = reader.lookup(_query((512, 512), "A"))
        assert hit is not None and hit.tier == "exact" and hit.tuned.config == {"tile": 9}


def _errors(url: str) -> tuple[str, str]:
    """The message of opening ``url`` with the reader, and with a read-only TuningLog."""
    messages = []
    for opener in (open_read_only, lambda u: TuningLog.open(u, read_only=True)):
        with pytest.raises(DatabaseError) as info:
            opener(url)
        messages.append(f"{type(info.value).__name__}: {info.value}")
    return messages[0], messages[1]


def test_the_reader_refuses_what_a_read_only_log_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all " * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text)")
    conn.close()
    (tmp_path / "empty.db").touch()
    for url in (
        f"sqlite:///{tmp_path}/nodir/x.db",
        f"sqlite:///{tmp_path}/x.db",
        "sqlite:///relative/x.db",
        "sqlite://",
        f"sqlite:///{tmp_path}",
        f"sqlite:///{junk}",
        f"sqlite:///{other}",
        f"sqlite:///{tmp_path}/empty.db",
    ):
        assert parse_plain(url) is not None, url
        mine, theirs = _errors(url)
        assert mine == theirs, url
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "junk.db", "other.db"]


def test_a_newer_schema_is_refused_alike(db_url: str) -> None:
    tuned_log(db_url)
    with TuningLog.open(db_url) as log, log._write() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    mine, theirs = _errors(db_url)
    assert mine == theirs and mine.endswith("newer ktune; upgrade ktune")


def test_an_older_schema_is_refused_alike(db_url: str) -> None:
    with TuningLog.open(db_url) as log, log._write() as conn:
        command.downgrade(alembic_config(conn), "0001")
    mine, theirs = _errors(db_url)
    assert mine == theirs and mine.endswith("run `ktune db upgrade --db URL` first")


def test_the_reader_knows_the_shipped_revisions() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    shipped = [s.revision for s in script.walk_revisions()]
    assert list(REVISIONS) == shipped[::-1] and HEAD_REVISION == head_revision()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///relative.db",
        "sqlite:////abs/path/k.db",
        "sqlite:////with space/a+b~c_d-e.db",
        "sqlite:///~/k.db",
        "sqlite://",
        "postgresql://u:pw@h:5433/d",
        "postgres://u@h/d",
        "postgresql+psycopg://u@h/d?sslmode=require",
        "postgresql://postgres@127.0.0.1:5432/test?options=-csearch_path%3Dx&b=2&a=1",
        "postgresql:///d",
        "postgresql://h/d",
    ],
)
def test_plain_urls_read_as_sqlalchemy_reads_them(url: str) -> None:
    plain = parse_plain(url)
    assert plain is not None
    assert plain.text == resolve_url(url) and plain.masked == mask_url(resolve_url(url))


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///:memory:",
        "sqlite:///file:/a/k.db?mode=ro&uri=true",
        "sqlite:////tmp/a%20b.db",
        "sqlite:////tmp/é.db",
        "sqlite:////tmp/a#b.db",
        "postgresql://u:p%40ss@h/d",
        "postgresql://u@[::1]/d",
        "mysql://u@h/d",
        "not a url",
    ],
)
def test_other_urls_go_to_sqlalchemy(url: str) -> None:
    assert parse_plain(url) is None


def test_a_lookup_imports_no_sqlalchemy_nor_numpy(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    tuned_log(url)
    code = (
        "import sys\n"
        "from ktune.db.lookup_records import LookupQuery\n"
        "from ktune.db.reader import open_read_only\n"
        f"log = open_read_only({url!r})\n"
        "for shape in ((1024, 1024), (3000, 3000)):\n"
        "    key = 'mm/' + 'x'.join(map(str, shape)) + '/float32'\n"
        "    assert log.lookup(LookupQuery(key, 'mm', shape, 'float32', '', 'A')) is not None\n"
        "heavy = ('sqlalchemy', 'alembic', 'numpy', 'pydantic')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_nearest_shape_is_the_same_with_numpy_or_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server (numpy loaded) and a build (no numpy) pick the same shape at the same distance:
    the nearest by shape_distance, the smallest key among equals."""
    import random

    from ktune.db import shape_index

    url = f"sqlite:///{tmp_path / 'k.db'}"
    rng = random.Random(5)
    sizes = [1, 3, 64, 96, 128, 1000, 4096]
    tuned = sorted({tuple(rng.choice(sizes) for _ in range(3)) for _ in range(60)})
    with TuningLog.open(url) as log:
        dev = log.get_or_create_device("A")
        for shape in tuned:
            w = log.get_or_create_workload(f"mm/{'x'.join(map(str, shape))}/f", "mm", shape, "f")
            log.add_trials(None, w.id, dev.id, "import", [TrialIn({}, "c", "ok", time_ms=1.0)])
    asked = [tuple(rng.choice([*sizes, 7, 2048, 5000]) for _ in range(3)) for _ in range(200)]
    answers = {}
    numpy = pytest.importorskip("numpy")
    for mode, loaded in (("numpy", numpy), ("plain", None)):
        monkeypatch.setattr(shape_index, "_numpy", lambda loaded=loaded: loaded)
        with open_read_only(url) as reader:
            answers[mode] = [reader._shapes.nearest(reader._run, _q(s)) for s in asked]
    assert answers["numpy"] == answers["plain"]
    for shape, (key, distance) in zip(asked, answers["plain"]):
        best = min(shape_distance(shape, t) for t in tuned)
        ties = sorted(
            f"mm/{'x'.join(map(str, t))}/f" for t in tuned if shape_distance(shape, t) == best
        )
        assert (key, distance) == (ties[0], best)


def _q(shape: tuple[int, ...]) -> LookupQuery:
    return LookupQuery(f"mm/{'x'.join(map(str, shape))}/f", "mm", shape, "f", "", "A")
