"""The best config follows the kernel's interface: a trial whose parameter names differ from
the best's replaces it whatever its time; among the same names only a faster one does. The
same on every path that writes the best (jobs, imports, concurrent writers, the 0003
migration of older logs), on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from alembic import command

from ktune.db import DeviceRecord, LookupQuery, TrialIn, TrialRecord, TuningLog, WorkloadRecord
from ktune.db import repository as db_repository
from ktune.db.engine import make_engine, resolve_url
from ktune.db.migrate import alembic_config
from ktune.testing.records import job_spec

pytestmark = pytest.mark.both_databases  # the best-config rule and its migration on each backend


def t(config: dict[str, Any], time_ms: float, status: str = "ok") -> TrialIn:
    key = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
    return TrialIn(config, key, status, time_ms=time_ms if status == "ok" else None)


def replayed(history: list[TrialRecord]) -> tuple[int, float, dict[str, Any]] | None:
    """The rule, replayed over the ok trials in the order they were recorded."""
    best: tuple[int, float, dict[str, Any]] | None = None
    for trial in sorted(history, key=lambda r: r.id):
        if trial.status != "ok" or trial.time_ms is None:
            continue
        if best is None or set(trial.config) != set(best[2]) or trial.time_ms < best[1]:
            best = (trial.id, trial.time_ms, trial.config)
    return best


def stored(log: TuningLog) -> tuple[int, float, dict[str, Any]]:
    (best,) = log.best()
    return best.trial_id, best.time_ms, best.config


def add(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord, *trials: TrialIn
) -> list[int]:
    return log.add_trials(None, workload.id, device.id, "import", list(trials))


def test_a_new_interface_replaces_a_faster_best(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    add(log, workload, device, t({"tile": 64}, 1.0))
    # A knob is added: the new kernel is slower, but the old config no longer fits it.
    (added,) = add(log, workload, device, t({"tile": 64, "unroll": 2}, 5.0))
    assert stored(log) == (added, 5.0, {"tile": 64, "unroll": 2})
    query = LookupQuery(workload.key, workload.operator, workload.shape, "", "", device.name)
    answer = log.lookup(query)
    assert answer is not None and answer.tuned.config == {"tile": 64, "unroll": 2}
    # Among the new interface's trials, only a faster one replaces it; a tie does not.
    add(log, workload, device, t({"tile": 32, "unroll": 2}, 6.0), t({"tile": 16, "unroll": 2}, 5.0))
    assert stored(log)[0] == added
    (faster,) = add(log, workload, device, t({"tile": 32, "unroll": 4}, 4.0))
    assert stored(log)[0] == faster
    # A knob is removed (tile): replaced again, whatever the time.
    (removed,) = add(log, workload, device, t({"unroll": 4}, 9.0))
    assert stored(log) == (removed, 9.0, {"unroll": 4})
    # Renamed values of the same names are the same interface: time decides.
    add(log, workload, device, t({"unroll": "8"}, 9.5))
    assert stored(log)[0] == removed


def test_failed_trials_of_a_new_interface_change_nothing(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    (first,) = add(log, workload, device, t({"tile": 64}, 1.0))
    add(log, workload, device, t({"tile": 64, "unroll": 2}, 0.0, status="compile_error"))
    assert stored(log)[0] == first


def test_a_batch_is_read_in_order(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    add(log, workload, device, t({"a": 1}, 1.0))
    # The batch switches to {a, b} and back to {a}: its last interface restarts the best, so
    # its {a} trial replaces the faster stored {a} one (the {a, b} trials came in between).
    ids = add(
        log,
        workload,
        device,
        t({"a": 1, "b": 1}, 3.0),
        t({"a": 2}, 2.5),
        t({"a": 3}, 2.0),
        t({"a": 4}, 2.0),
    )
    assert stored(log) == (ids[2], 2.0, {"a": 3})
    assert stored(log) == replayed(log.history(workload.id, device.id))
    # One interface throughout: the first fastest, against the stored best.
    ids = add(log, workload, device, t({"a": 5}, 1.5), t({"a": 6}, 1.0), t({"a": 7}, 1.0))
    assert stored(log)[0] == ids[1]


def test_jobs_follow_the_rule_and_keep_their_own_best(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    old = log.create_job(job_spec(workload, device))
    log.add_trials(old.id, workload.id, device.id, "replay", [t({"tile": 1}, 1.0)])
    new = log.create_job(job_spec(workload, device))
    (trial_id,) = log.add_trials(
        new.id, workload.id, device.id, "replay", [t({"tile": 1, "vec": 4}, 3.0)]
    )
    assert stored(log)[0] == trial_id
    assert log.get_job(old.id).best_time_ms == 1.0  # type: ignore[union-attr]
    assert log.get_job(new.id).best_trial_id == trial_id  # type: ignore[union-attr]


def test_any_history_ends_with_the_replayed_best(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    rng = random.Random(7)
    interfaces = [("tile",), ("tile", "unroll"), ("unroll",)]

    def trial(n: int, i: int) -> TrialIn:
        """Mostly the interface of the time (it changes twice), now and then another one."""
        names = rng.choice(interfaces) if rng.random() < 0.3 else interfaces[n // 14]
        status = "ok" if rng.random() < 0.8 else "runtime_error"
        return t({name: f"{n}.{i}" for name in names}, float(rng.randrange(1, 20)), status)

    for n in range(40):
        batch = [trial(n, i) for i in range(rng.randrange(1, 4))]
        add(log, workload, device, *batch)
        if log.best():
            assert stored(log) == replayed(log.history(workload.id, device.id))


def test_concurrent_writers_take_effect_in_the_order_of_their_trials(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer of the old interface that records its trial after a writer of the new one
    cannot leave the new one's config as best, even if it commits first."""
    add(log, workload, device, t({"tile": 1}, 1.0))
    inserted, release = threading.Event(), threading.Event()
    real = db_repository._upsert_best

    def slow_upsert(*args: Any, **kwargs: Any) -> None:
        if threading.current_thread().name == "new":
            inserted.set()
            release.wait(10)
        real(*args, **kwargs)

    monkeypatch.setattr(db_repository, "_upsert_best", slow_upsert)
    errors: list[BaseException] = []

    def write(config: dict[str, Any], time_ms: float) -> None:
        try:
            add(log, workload, device, t(config, time_ms))
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    new = threading.Thread(target=write, args=({"tile": 1, "unroll": 2}, 5.0), name="new")
    old = threading.Thread(target=write, args=({"tile": 2}, 2.0), name="old")
    new.start()
    assert inserted.wait(10)  # "new" has its trial id and holds its transaction open
    old.start()
    time.sleep(0.5)  # without serialisation, "old" would record and commit its best here
    release.set()
    new.join()
    old.join()
    assert errors == []
    history = log.history(workload.id, device.id)
    assert [r.config for r in history][-2:] == [{"tile": 1, "unroll": 2}, {"tile": 2}]
    assert stored(log) == replayed(history)
    assert stored(log)[2] == {"tile": 2}  # the interface of the last trial recorded


def test_the_0003_migration_recomputes_stale_bests(db_url: str) -> None:
    engine = make_engine(resolve_url(db_url))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0002")
        sql = conn.exec_driver_sql
        sql(
            "INSERT INTO device (id, name, vendor, architecture, created_at) "
            "VALUES (1, 'A100', '', '', CURRENT_TIMESTAMP)"
        )
        for w in (1, 2):
            sql(
                "INSERT INTO workload (id, key, operator, shape, dtype, layout, created_at) "
                f"VALUES ({w}, 'mm/{w}', 'mm', '[{w}]', '', '', CURRENT_TIMESTAMP)"
            )
        trials = [  # (id, workload, status, time, config)
            (1, 1, "ok", 1.0, '{"tile": 1}'),
            (
                2,
                1,
                "ok",
                4.0,
                '{"tile": 1, "unroll": 2}',
            ),  # a knob added: the old rule kept trial 1
            (3, 1, "ok", 3.0, '{"tile": 2, "unroll": 2}'),
            (4, 1, "compile_error", None, '{"tile": 3}'),
            (5, 2, "ok", 2.0, '{"tile": 1}'),  # workload 2 never changed its interface
            (6, 2, "ok", 1.0, '{"tile": 2}'),
            (7, 2, "ok", 1.0, '{"tile": 3}'),
        ]
        for id_, w, status, time_ms, config in trials:
            sql(
                "INSERT INTO trial (id, workload_id, device_id, backend, config, config_key, "
                "status, time_ms, times, "
                "compile_ms, bench_ms, error, strategy, clock_s, toolchain, created_at) VALUES "
                f"({id_}, {w}, 1, 'import', '{config}', 'k{id_}', '{status}', "
                f"{time_ms or 'NULL'}, '[]', 0, 0, '', '', 0, "
                "'{}', CURRENT_TIMESTAMP)"
            )
        if conn.dialect.name == "postgresql":  # the ids above were given, not drawn
            sql("SELECT setval(pg_get_serial_sequence('trial', 'id'), 7)")
        for w, trial_id, time_ms, config in (
            (1, 1, 1.0, '{"tile": 1}'),
            (2, 6, 1.0, '{"tile": 2}'),
        ):
            sql(
                "INSERT INTO best_config "
                "(workload_id, device_id, trial_id, time_ms, config, updated_at) VALUES "
                f"({w}, 1, {trial_id}, {time_ms}, '{config}', '2020-01-01 00:00:00')"
            )
    engine.dispose()
    with TuningLog.open(db_url) as log:  # migrates
        first, second = log.best()
        assert (first.trial_id, first.time_ms, first.config) == (3, 3.0, {"tile": 2, "unroll": 2})
        assert first.updated_at.year > 2020
        assert (second.trial_id, second.updated_at.year) == (6, 2020)  # left as it was
        (trial_id,) = log.add_trials(None, 1, 1, "import", [t({"tile": 4, "unroll": 2}, 2.5)])
        assert log.best(workload_key="mm/1")[0].trial_id == trial_id
