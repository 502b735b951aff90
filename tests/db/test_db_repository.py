"""TuningLog on SQLite and PostgreSQL: devices, workloads, jobs, trials, best configs."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from ktune.db import (
    ConstraintError,
    DeviceRecord,
    TrialIn,
    TuningLog,
    WorkloadRecord,
)
from ktune.db import repository as db_repository
from ktune.testing.records import job_spec, trial

pytestmark = pytest.mark.both_databases  # the repository's behaviour on each backend


def snapshot(log: TuningLog, workload: WorkloadRecord, device: DeviceRecord) -> tuple[Any, ...]:
    return (
        [(j.id, j.n_trials, j.best_time_ms, j.best_trial_id, j.clock_s) for j in log.list_jobs()],
        log.history(workload.id, device.id),
        log.best(),
    )


# -- devices and workloads ----------------------------------------------------------------


def test_device_get_or_create_is_idempotent_and_fills_missing(log: TuningLog) -> None:
    first = log.get_or_create_device("RTX 4090")
    assert (first.vendor, first.architecture, first.spec) == ("", "", None)
    again = log.get_or_create_device("RTX 4090", "nvidia", "sm_89", {"sm_count": 128})
    assert again.id == first.id
    assert (again.vendor, again.architecture, again.spec) == ("nvidia", "sm_89", {"sm_count": 128})
    kept = log.get_or_create_device("RTX 4090", "other", "sm_00", {"sm_count": 1})
    assert kept == again  # stored values are never overwritten
    assert log.get_device("RTX 4090") == again
    assert log.get_device("nope") is None
    log.get_or_create_device("A100")
    assert [d.name for d in log.list_devices()] == ["A100", "RTX 4090"]


def test_workload_get_or_create(log: TuningLog) -> None:
    w = log.get_or_create_workload("k", "matmul", [64, 32, 16], "float16")
    assert (w.key, w.operator, w.shape, w.dtype, w.layout, w.space) == (
        "k",
        "matmul",
        (64, 32, 16),
        "float16",
        "",
        None,
    )
    space = {"params": {"tile": [16, 32]}}
    w2 = log.get_or_create_workload("k", "matmul", (64, 32, 16), space=space)
    assert w2.id == w.id and w2.space == space and w2.dtype == "float16"
    assert log.get_workload("k") == w2
    assert log.get_workload("other") is None
    with pytest.raises(ValueError, match="stored for matmul"):
        log.get_or_create_workload("k", "conv2d", (64, 32, 16))
    assert [x.key for x in log.list_workloads()] == ["k"]


def test_unique_names_and_keys(log: TuningLog) -> None:
    for _ in range(3):
        log.get_or_create_device("A100")
        log.get_or_create_workload("w", "matmul", (1,))
    assert len(log.list_devices()) == 1 and len(log.list_workloads()) == 1


@pytest.mark.postgres
def test_concurrent_get_or_create_device_gives_one_row(pg_url: str) -> None:
    with TuningLog.open(pg_url) as log:
        barrier = threading.Barrier(8)
        results: list[DeviceRecord] = []
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                barrier.wait()
                results.append(log.get_or_create_device("H100", "nvidia", "sm_90"))
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len({r.id for r in results}) == 1 and len(results) == 8
        assert len(log.list_devices()) == 1


# -- jobs ---------------------------------------------------------------------------------


def test_create_and_get_job(log: TuningLog, workload: WorkloadRecord, device: DeviceRecord) -> None:
    spec = job_spec(workload, device, options={"replay": "a.json", "digest": "abc"}, seed=None)
    job = log.create_job(spec)
    assert job.spec == spec
    assert (job.workload_key, job.device_name) == (workload.key, device.name)
    assert (job.state, job.n_trials, job.best_time_ms, job.best_trial_id) == (
        "queued",
        0,
        None,
        None,
    )
    assert job.clock_s == 0.0 and job.error == ""
    assert job.created_at.utcoffset() == timedelta(0)
    assert job.started_at is None and job.finished_at is None
    assert log.get_job(job.id) == job
    assert log.get_job(job.id + 1000) is None


def test_job_state_transitions_and_timestamps(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    job = log.create_job(job_spec(workload, device))
    running = log.set_job_state(job.id, "running")
    assert running.state == "running" and running.started_at is not None
    assert running.heartbeat_at is not None and running.finished_at is None
    assert running.started_at >= job.created_at

    failed = log.set_job_state(job.id, "failed", error="worker died")
    assert failed.error == "worker died" and failed.finished_at is not None
    assert failed.finished_at >= running.started_at

    resumed = log.set_job_state(job.id, "running")
    assert resumed.started_at == running.started_at  # the first start is kept
    assert resumed.finished_at is None and resumed.error == ""

    time.sleep(0.01)
    log.heartbeat(job.id)
    beat = log.get_job(job.id)
    assert beat is not None and beat.heartbeat_at is not None
    assert resumed.heartbeat_at is not None and beat.heartbeat_at > resumed.heartbeat_at

    done = log.set_job_state(job.id, "done")
    assert done.state == "done" and done.finished_at is not None

    with pytest.raises(ValueError, match="unknown job state"):
        log.set_job_state(job.id, "paused")
    with pytest.raises(LookupError):
        log.set_job_state(job.id + 1000, "done")
    with pytest.raises(LookupError):
        log.heartbeat(job.id + 1000)


def test_job_state_check_constraint(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    """The CHECK constraint backs up the Python validation."""
    job = log.create_job(job_spec(workload, device))
    with pytest.raises(ConstraintError, match="ck_job_state"), log._write() as conn:
        conn.exec_driver_sql(f"UPDATE job SET state = 'paused' WHERE id = {job.id}")


def test_list_jobs_filters_and_pages(log: TuningLog, device: DeviceRecord) -> None:
    other_device = log.get_or_create_device("RTX 4090")
    w1 = log.get_or_create_workload("w1", "matmul", (1,))
    w2 = log.get_or_create_workload("w2", "matmul", (2,))
    ids = [
        log.create_job(job_spec(w, d)).id
        for w, d in [
            (w1, device),
            (w2, device),
            (w1, other_device),
            (w2, other_device),
            (w1, device),
        ]
    ]
    log.set_job_state(ids[1], "running")
    log.set_job_state(ids[3], "done")

    assert [j.id for j in log.list_jobs()] == ids[::-1]
    assert [j.id for j in log.list_jobs(state="queued")] == [ids[4], ids[2], ids[0]]
    assert [j.id for j in log.list_jobs(workload_key="w1")] == [ids[4], ids[2], ids[0]]
    assert [j.id for j in log.list_jobs(device_name="RTX 4090")] == [ids[3], ids[2]]
    assert [j.id for j in log.list_jobs(workload_key="w2", device_name=device.name)] == [ids[1]]
    assert [j.id for j in log.list_jobs(limit=2)] == [ids[4], ids[3]]
    assert [j.id for j in log.list_jobs(limit=2, offset=2)] == [ids[2], ids[1]]
    assert [j.id for j in log.list_jobs(limit=2, offset=4)] == [ids[0]]
    assert log.list_jobs(workload_key="missing") == []
    with pytest.raises(ValueError):
        log.list_jobs(state="nope")


def test_find_job_by_option(log: TuningLog, workload: WorkloadRecord, device: DeviceRecord) -> None:
    first = log.create_job(job_spec(workload, device, backend="import", options={"digest": "abc"}))
    log.create_job(job_spec(workload, device, backend="import", options={"digest": "def", "n": 3}))
    newest = log.create_job(job_spec(workload, device, backend="import", options={"digest": "abc"}))
    found = log.find_job_by_option("digest", "abc")
    assert found is not None and found.id == newest.id != first.id
    assert log.find_job_by_option("digest", "zzz") is None
    assert log.find_job_by_option("missing", "abc") is None
    n = log.find_job_by_option("n", 3)
    assert n is not None and n.spec.options == {"digest": "def", "n": 3}
    assert log.find_job_by_option("n", "3") is None
    assert log.find_job_by_option("n", True) is None


# -- trials ---------------------------------------------------------------------------------


def test_add_trials_roundtrip_and_job_progress(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    job = log.create_job(job_spec(workload, device))
    batch = [trial(0, 5.0), trial(1, status="compile_error"), trial(2, 3.0)]
    ids = log.add_trials(job.id, workload.id, device.id, "replay", batch, clock_s=1.5)
    assert len(ids) == 3 and ids == sorted(ids)

    records = log.job_trials(job.id)
    assert [r.id for r in records] == ids
    for given, stored in zip(batch, records):
        assert (stored.config, stored.config_key, stored.status) == (
            given.config,
            given.config_key,
            given.status,
        )
        assert (stored.time_ms, stored.times_ms, stored.seq) == (
            given.time_ms,
            given.times_ms,
            given.seq,
        )
        assert (stored.error, stored.strategy, stored.toolchain) == (
            given.error,
            given.strategy,
            given.toolchain,
        )
        assert (stored.job_id, stored.workload_id, stored.device_id, stored.backend) == (
            job.id,
            workload.id,
            device.id,
            "replay",
        )
        assert stored.created_at.utcoffset() is not None

    updated = log.get_job(job.id)
    assert updated is not None
    assert (updated.n_trials, updated.best_time_ms, updated.best_trial_id, updated.clock_s) == (
        3,
        3.0,
        ids[2],
        1.5,
    )
    assert updated.heartbeat_at is not None

    more = log.add_trials(job.id, workload.id, device.id, "replay", [trial(3, 9.0)])
    slower = log.get_job(job.id)
    assert slower is not None
    assert (slower.n_trials, slower.clock_s) == (4, 1.5)  # clock not given: kept
    assert (slower.best_time_ms, slower.best_trial_id) == (3.0, ids[2])  # a slower one: kept
    more += log.add_trials(job.id, workload.id, device.id, "replay", [trial(4, 2.5)], 2.0)
    faster = log.get_job(job.id)
    assert faster is not None
    assert (faster.n_trials, faster.best_time_ms, faster.best_trial_id, faster.clock_s) == (
        5,
        2.5,
        more[1],
        2.0,
    )
    assert faster.heartbeat_at is not None and faster.heartbeat_at.utcoffset() is not None
    assert [r.id for r in log.job_trials(job.id)] == ids + more


def test_job_trials_ordered_by_seq(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    job = log.create_job(job_spec(workload, device))
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(5), trial(4)])
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(1), trial(2), trial(3)])
    assert [r.seq for r in log.job_trials(job.id)] == [1, 2, 3, 4, 5]


def test_history_and_trials_for_workload(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    other = log.get_or_create_device("RTX 4090")
    job = log.create_job(job_spec(workload, device))
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(0), trial(1, status="timeout")])
    log.add_trials(None, workload.id, device.id, "import", [trial(0, seq=None), trial(7, seq=None)])
    log.add_trials(None, workload.id, other.id, "import", [trial(0, seq=None)])

    history = log.history(workload.id, device.id)
    assert [(t.job_id, t.config_key) for t in history] == [
        (job.id, "tile=0"),
        (job.id, "tile=1"),
        (None, "tile=0"),
        (None, "tile=7"),
    ]
    assert [t.status for t in log.history(workload.id, device.id, statuses=["timeout"])] == [
        "timeout"
    ]
    assert len(log.history(workload.id, other.id)) == 1
    assert {t.device_id for t in log.trials_for_workload(workload.id)} == {device.id, other.id}
    assert len(log.trials_for_workload(workload.id)) == 5


def test_job_cannot_measure_a_config_twice_or_write_a_seq_twice(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    job = log.create_job(job_spec(workload, device))
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(0), trial(1)])
    with pytest.raises(ConstraintError):
        log.add_trials(job.id, workload.id, device.id, "replay", [trial(1, seq=5)])
    with pytest.raises(ConstraintError):
        log.add_trials(job.id, workload.id, device.id, "replay", [trial(9, seq=1)])
    # Another job, or an import, may hold the same config.
    job2 = log.create_job(job_spec(workload, device))
    log.add_trials(job2.id, workload.id, device.id, "replay", [trial(1)])
    log.add_trials(None, workload.id, device.id, "import", [trial(1, seq=None), trial(1, seq=None)])


def test_batch_with_one_bad_row_writes_nothing(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    job = log.create_job(job_spec(workload, device))
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(0, 5.0)], clock_s=1.0)
    before = snapshot(log, workload, device)
    bad = [trial(1, 0.5), trial(2, 0.4), trial(1, 0.3, seq=3)]  # tile=1 twice in one job
    with pytest.raises(ConstraintError, match=r"rejected by"):
        log.add_trials(job.id, workload.id, device.id, "replay", bad, clock_s=2.0)
    assert snapshot(log, workload, device) == before


def test_batch_for_unknown_job_writes_nothing(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    before = snapshot(log, workload, device)
    with pytest.raises(ConstraintError):
        log.add_trials(999, workload.id, device.id, "replay", [trial(0)])
    assert snapshot(log, workload, device) == before


@pytest.mark.parametrize("step", ["_update_job_progress", "_upsert_best"])
def test_crash_mid_batch_writes_nothing(
    log: TuningLog,
    workload: WorkloadRecord,
    device: DeviceRecord,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    job = log.create_job(job_spec(workload, device))
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(0, 5.0)])
    before = snapshot(log, workload, device)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed after the inserts")

    monkeypatch.setattr(db_repository, step, crash)
    with pytest.raises(KeyboardInterrupt):
        log.add_trials(job.id, workload.id, device.id, "replay", [trial(1, 0.1), trial(2, 0.2)])
    monkeypatch.undo()
    assert snapshot(log, workload, device) == before
    # The log is still usable, and the same batch goes through afterwards.
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(1, 0.1), trial(2, 0.2)])
    assert log.get_job(job.id).n_trials == 3  # type: ignore[union-attr]


def test_invalid_trials_are_rejected_before_writing(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    bad = [
        TrialIn(config={}, config_key="a", status="great"),
        TrialIn(config={}, config_key="a", status="ok"),
        TrialIn(config={}, config_key="a", status="ok", time_ms=float("nan")),
        TrialIn(config={}, config_key="a", status="ok", time_ms=1.0, times_ms=(float("inf"),)),
    ]
    for t in bad:
        with pytest.raises(ValueError):
            log.add_trials(None, workload.id, device.id, "import", [t])
    assert log.history(workload.id, device.id) == []


# -- best configs ---------------------------------------------------------------------------


def test_best_config_kept_current_across_batches_and_jobs(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    assert log.best() == []
    job1 = log.create_job(job_spec(workload, device))
    # Non-ok trials never become best, however fast they claim to be.
    log.add_trials(
        job1.id, workload.id, device.id, "replay", [trial(0, 0.01, status="wrong_result")]
    )
    assert log.best() == [] and log.get_job(job1.id).best_time_ms is None  # type: ignore[union-attr]

    ids = log.add_trials(job1.id, workload.id, device.id, "replay", [trial(1, 4.0), trial(2, 2.0)])
    (best,) = log.best()
    assert (best.workload_key, best.device_name, best.trial_id, best.time_ms, best.config) == (
        workload.key,
        device.name,
        ids[1],
        2.0,
        {"tile": 2},
    )
    first_update = best.updated_at

    # A slower batch changes nothing.
    log.add_trials(job1.id, workload.id, device.id, "replay", [trial(3, 3.0)])
    assert log.best() == [best]

    # Another job finds something faster: the best moves; each job keeps its own best.
    job2 = log.create_job(job_spec(workload, device))
    (fast,) = log.add_trials(job2.id, workload.id, device.id, "replay", [trial(4, 1.0)])
    (best2,) = log.best()
    assert (best2.trial_id, best2.time_ms, best2.config) == (fast, 1.0, {"tile": 4})
    assert best2.updated_at >= first_update
    assert log.get_job(job1.id).best_time_ms == 2.0  # type: ignore[union-attr]
    assert log.get_job(job2.id).best_trial_id == fast  # type: ignore[union-attr]

    # An import without a job can improve it too; an equal time does not displace it.
    log.add_trials(None, workload.id, device.id, "import", [trial(5, 1.0, seq=None)])
    assert log.best()[0].trial_id == fast
    (imported,) = log.add_trials(None, workload.id, device.id, "import", [trial(6, 0.5, seq=None)])
    assert log.best()[0].trial_id == imported


def test_best_filters_and_order(log: TuningLog, device: DeviceRecord) -> None:
    other = log.get_or_create_device("AMD MI300X", "amd")
    wb = log.get_or_create_workload("b", "matmul", (2,))
    wa = log.get_or_create_workload("a", "matmul", (1,))
    for w in (wb, wa):
        for d in (device, other):
            log.add_trials(None, w.id, d.id, "import", [trial(w.id * 10 + d.id, seq=None)])
    assert [(b.workload_key, b.device_name) for b in log.best()] == [
        ("a", "AMD MI300X"),
        ("a", device.name),
        ("b", "AMD MI300X"),
        ("b", device.name),
    ]
    assert [b.device_name for b in log.best(workload_key="a")] == ["AMD MI300X", device.name]
    assert [b.workload_key for b in log.best(device_name=device.name)] == ["a", "b"]
    assert len(log.best(workload_key="b", device_name="AMD MI300X")) == 1
    assert log.best(workload_key="zzz") == []


# -- scale ------------------------------------------------------------------------------------


def test_import_of_11k_trials_is_fast(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    n = 11_000
    batch = [
        TrialIn(
            config={"block_size_x": i % 64, "block_size_y": i // 64, "tile": i % 7, "unroll": 1},
            config_key=f"{i % 64},{i // 64}",
            status="ok" if i % 5 else "compile_error",
            time_ms=1.0 + (i * 7919 % n) / n if i % 5 else None,
            times_ms=(1.0, 1.1, 1.2, 1.3, 1.4) if i % 5 else (),
            compile_ms=120.0,
            bench_ms=3.0,
            strategy="import",
        )
        for i in range(n)
    ]
    start = time.perf_counter()
    ids = log.add_trials(None, workload.id, device.id, "import", batch)
    elapsed = time.perf_counter() - start
    assert len(ids) == n and len(set(ids)) == n
    start = time.perf_counter()
    history = log.history(workload.id, device.id)
    read = time.perf_counter() - start
    assert [t.id for t in history] == ids
    best_i = min((i for i in range(n) if i % 5), key=lambda i: batch[i].time_ms or 0.0)
    assert log.best()[0].trial_id == ids[best_i]
    assert elapsed < 5.0 and read < 5.0, (elapsed, read)  # ~1 s and less on a laptop


def test_concurrent_writers(log: TuningLog, workload: WorkloadRecord, device: DeviceRecord) -> None:
    """Several threads, one job each, writing batches at once: all land, best is the global min."""
    jobs = [log.create_job(job_spec(workload, device)) for _ in range(4)]
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(k: int, job_id: int) -> None:
        try:
            barrier.wait()
            for b in range(5):
                batch = [trial(b * 10 + i, time_ms=10.0 - k - b - i / 10) for i in range(10)]
                log.add_trials(job_id, workload.id, device.id, "replay", batch, clock_s=float(b))
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k, j.id)) for k, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [log.get_job(j.id).n_trials for j in jobs] == [50] * 4  # type: ignore[union-attr]
    assert log.best()[0].time_ms == pytest.approx(10.0 - 3 - 4 - 0.9)
    assert len(log.history(workload.id, device.id)) == 200
