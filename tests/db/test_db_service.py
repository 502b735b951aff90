"""The log's service queries: job leases, cancellation, trials since, tiered lookup, API tokens,
counts, and the 0001 -> 0002 migration of a log that already holds data."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from alembic import command
from sqlalchemy import select

from ktune.db import (
    DeviceRecord,
    JobStateConflict,
    LeaseLost,
    LookupQuery,
    TrialIn,
    TuningLog,
    WorkloadRecord,
    shape_distance,
)
from ktune.db.engine import make_engine, resolve_url
from ktune.db.migrate import alembic_config
from ktune.db.queries import token_t
from ktune.testing.records import job_spec, trial

pytestmark = pytest.mark.both_databases  # claims, leases, cancels, tokens, lookups on each backend


def queued(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord, n: int, **overrides: Any
) -> list[int]:
    return [log.create_job(job_spec(workload, device, **overrides)).id for _ in range(n)]


# -- leases ----------------------------------------------------------------------------------


def test_claims_go_oldest_first_and_only_once(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    ids = queued(log, workload, device, 3)
    claimed = [log.claim_job(f"r{i}", 30) for i in range(4)]
    assert [j.id if j else None for j in claimed] == [*ids, None]
    first = claimed[0]
    assert first is not None and first.state == "running" and first.claimed_by == "r0"
    assert (
        first.lease_until is not None
        and first.started_at is not None
        and first.heartbeat_at is not None
    )


def test_claims_respect_backends(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    (gpu,) = queued(log, workload, device, 1, backend="cupy")
    (replay,) = queued(log, workload, device, 1)
    job = log.claim_job("cpu-box", 30, backends=["replay"])
    assert job is not None and job.id == replay
    assert log.claim_job("cpu-box", 30, backends=["replay"]) is None
    job = log.claim_job("gpu-box", 30, backends=["cupy", "replay"])
    assert job is not None and job.id == gpu


def test_jobs_run_by_the_cli_are_never_claimed(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    cli = log.create_job(job_spec(workload, device), state="running")  # `ktune tune`: no lease
    assert cli.lease_until is None
    assert log.claim_job("runner", 30) is None


def test_cancel_of_a_cli_job(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    """A `ktune tune` process holds its job without a lease: a cancel asks it to stop (it reads
    the flag after each batch); one of a job held by nobody, or whose process died, is at once."""
    unheld = log.create_job(job_spec(workload, device), state="running")
    assert log.request_cancel(unheld.id).state == "cancelled"
    held = log.create_job(job_spec(workload, device), state="running")
    log.set_job_state(held.id, "running", holder="ktune-tune:host:123")
    asked = log.request_cancel(held.id)
    assert (
        asked.state == "running"
        and asked.cancel_requested
        and asked.claimed_by == "ktune-tune:host:123"
    )
    assert log.cancel_unheld(held.id, "ktune-tune:host:999").state == "running"  # not its holder
    gone = log.cancel_unheld(held.id, "ktune-tune:host:123")
    assert gone.state == "cancelled" and gone.claimed_by is None and gone.finished_at is not None
    log.withdraw_cancel(held.id)  # `ktune tune --resume` of it, on purpose
    job = log.get_job(held.id)
    assert job is not None and not job.cancel_requested


def test_renew_and_release_only_for_the_holder(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    a, b = queued(log, workload, device, 2)
    log.claim_job("mine", 30)
    log.claim_job("theirs", 30)
    assert log.renew_leases("mine", [a, b], 60) == {a}
    assert log.release_job("mine", b) is False
    assert log.release_job("mine", a) is True
    job = log.get_job(a)
    assert (
        job is not None
        and job.state == "queued"
        and job.claimed_by is None
        and job.lease_until is None
    )
    assert log.renew_leases("mine", [a], 60) == set()  # released: nothing to renew
    again = log.claim_job("other", 30)
    assert (
        again is not None and again.id == a and again.started_at == job.started_at
    )  # first start kept


def test_expired_lease_is_claimable_and_fences_the_old_holder(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    (job_id,) = queued(log, workload, device, 1)
    log.claim_job("old", 0.05)
    time.sleep(0.1)
    assert log.claim_job("new", 30) is not None
    old = log.for_runner("old")
    with pytest.raises(LeaseLost, match="no longer held by runner old"):
        old.add_trials(job_id, workload.id, device.id, "replay", [trial(0)])
    assert log.job_trials(job_id) == [] and log.best(workload.key) == []  # nothing of the batch
    old.close()  # a view's close leaves the shared engine open
    log.for_runner("new").add_trials(job_id, workload.id, device.id, "replay", [trial(0)])
    job = log.get_job(job_id)
    assert job is not None and job.n_trials == 1 and job.best_config == {"tile": 0}


def test_cancel_by_state(log: TuningLog, workload: WorkloadRecord, device: DeviceRecord) -> None:
    q, r, abandoned, done = queued(log, workload, device, 4)
    assert log.request_cancel(q).state == "cancelled"
    for job_id, owner, lease in ((r, "live", 30), (abandoned, "dead", 0.3), (done, "x", 30)):
        claimed = log.claim_job(owner, lease)
        assert claimed is not None and claimed.id == job_id
    log.for_runner("x").set_job_state(done, "done")
    time.sleep(0.35)  # the lease of "dead" runs out
    running = log.request_cancel(r)
    assert running.state == "running" and running.cancel_requested
    control = log.job_control(r)
    assert control is not None and control.cancel_requested and control.claimed_by == "live"
    gone = log.request_cancel(abandoned)  # its runner died: cancelled at once, and unclaimable
    assert gone.state == "cancelled" and gone.claimed_by is None
    with pytest.raises(JobStateConflict, match="already done"):
        log.request_cancel(done)
    with pytest.raises(LookupError):
        log.request_cancel(999)


# -- trials since ----------------------------------------------------------------------------


def test_trials_since_and_limit(
    log: TuningLog, workload: WorkloadRecord, device: DeviceRecord
) -> None:
    job = log.create_job(job_spec(workload, device))
    log.add_trials(job.id, workload.id, device.id, "replay", [trial(i) for i in range(10)])
    assert [t.seq for t in log.job_trials(job.id, since=7)] == [7, 8, 9]
    assert [t.seq for t in log.job_trials(job.id, since=2, limit=3)] == [2, 3, 4]
    assert log.job_trials(job.id, since=10) == []


# -- lookup ----------------------------------------------------------------------------------


def _tuned(
    log: TuningLog, shape: tuple[int, ...], device: str, time_ms: float, operator: str = "matmul"
) -> None:
    key = f"{operator}/{'x'.join(map(str, shape))}/float32"
    w = log.get_or_create_workload(key, operator, shape, "float32")
    d = log.get_or_create_device(device)
    config = {"shape": list(shape), "device": device}
    log.add_trials(
        None,
        w.id,
        d.id,
        "import",
        [TrialIn(config=config, config_key=json.dumps(config), status="ok", time_ms=time_ms)],
    )


def _query(shape: tuple[int, ...], device: str) -> LookupQuery:
    return LookupQuery(
        f"matmul/{'x'.join(map(str, shape))}/float32", "matmul", shape, "float32", "", device
    )


def test_lookup_tiers(log: TuningLog) -> None:
    _tuned(log, (1024, 1024), "A", 1.0)
    _tuned(log, (4096, 4096), "A", 9.0)
    _tuned(log, (256, 256), "B", 0.1)
    _tuned(log, (256, 256), "C", 0.2)
    exact = log.lookup(_query((1024, 1024), "A"))
    assert exact is not None and exact.tier == "exact" and exact.tuned.time_ms == 1.0
    near = log.lookup(_query((3000, 3000), "A"))
    assert near is not None and near.tier == "nearest_shape" and near.tuned.shape == (4096, 4096)
    assert near.distance == pytest.approx(shape_distance((3000, 3000), (4096, 4096)))
    assert log.lookup(_query((3000, 3000), "A"), fallback=False) is None
    # Nothing of this shape on device A's rank... and no distance to tell devices apart:
    assert log.lookup(_query((256, 256), "Z")) is None
    distances = {("Z", "B"): 2.0, ("Z", "C"): 1.0}
    similar = log.lookup(
        _query((256, 256), "Z"), device_distance=lambda a, b: distances.get((a, b))
    )
    assert (
        similar is not None
        and similar.tier == "similar_device"
        and similar.tuned.device_name == "C"
    )
    assert similar.distance == 1.0
    # Devices without a known distance are never picked.
    only_b = log.lookup(
        _query((256, 256), "Z"), device_distance=lambda a, b: 5.0 if b == "B" else None
    )
    assert only_b is not None and only_b.tuned.device_name == "B"
    assert log.lookup(_query((256, 256), "Z"), device_distance=lambda a, b: None) is None
    assert log.operator_ranks("matmul") == {2} and log.operator_ranks("conv") == set()
    assert [t.workload_key for t in log.tuned_configs(operator="matmul", device="A")] == [
        "matmul/1024x1024/float32",
        "matmul/4096x4096/float32",
    ]


def test_nearest_shape_ties_go_to_the_smallest_key(log: TuningLog) -> None:
    _tuned(log, (1024, 4096), "A", 1.0)
    _tuned(log, (4096, 1024), "A", 0.5)
    hit = log.lookup(_query((2048, 2048), "A"))
    assert (
        hit is not None
        and hit.tuned.workload_key == "matmul/1024x4096/float32"
        and hit.distance == 2.0
    )


def test_nearest_shape_sees_shapes_tuned_since_by_another_process(db_url: str) -> None:
    with TuningLog.open(db_url) as reader, TuningLog.open(db_url) as writer:
        _tuned(writer, (1024, 1024), "A", 1.0)
        first = reader.lookup(_query((4000, 4000), "A"))
        assert first is not None and first.tuned.shape == (1024, 1024)
        _tuned(writer, (4096, 4096), "A", 2.0)  # the reader's cached shapes are now stale
        second = reader.lookup(_query((4000, 4000), "A"))
        assert second is not None and second.tuned.shape == (4096, 4096)
        assert second.distance == shape_distance((4000, 4000), (4096, 4096))  # exactly


def test_shape_distance() -> None:
    assert shape_distance((64, 64), (64, 64)) == 0.0
    assert shape_distance((128, 32), (64, 64)) == 2.0
    with pytest.raises(ValueError, match="different ranks"):
        shape_distance((1, 2), (1, 2, 3))


# -- tokens ----------------------------------------------------------------------------------


def test_tokens_are_stored_hashed_and_verified(log: TuningLog) -> None:
    record, token = log.create_token("  ci  ")
    assert record.name == "ci" and token.startswith(f"ktune_{record.token_id}_")
    secret = token.split("_", 2)[2]
    with log._read() as conn:
        row = conn.execute(select(token_t)).one()
    assert secret not in json.dumps([str(v) for v in row]) and len(row.digest) == 64
    assert log.verify_token(token) == record
    for wrong in (
        token + "x",
        token[:-1] + ("a" if token[-1] != "a" else "b"),
        "ktune_zz_" + secret,
        "",
        secret,
    ):
        assert log.verify_token(wrong) is None
    _, other = log.create_token("ci")  # names need not be unique; revoking by name takes both
    assert log.revoke_token("ci") == 2
    assert log.verify_token(token) is None and log.verify_token(other) is None
    assert all(t.revoked_at is not None for t in log.list_tokens())
    with pytest.raises(ValueError, match="needs a name"):
        log.create_token("  ")


# -- counts ----------------------------------------------------------------------------------


def test_counts(log: TuningLog, workload: WorkloadRecord, device: DeviceRecord) -> None:
    job = log.create_job(job_spec(workload, device))
    log.add_trials(
        job.id, workload.id, device.id, "replay", [trial(0), trial(1, status="compile_error")]
    )
    log.add_trials(None, workload.id, device.id, "import", [trial(5, seq=None)])
    log.create_job(job_spec(workload, device), state="done")
    assert log.job_counts() == {"queued": 1, "done": 1}
    assert log.trial_counts() == {"ok": 1, "compile_error": 1}  # the import is not a measurement


# -- migration --------------------------------------------------------------------------------


def test_a_0001_log_with_data_upgrades_to_0002(db_url: str) -> None:
    engine = make_engine(resolve_url(db_url))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
        conn.exec_driver_sql(
            "INSERT INTO device (id, name, vendor, architecture, created_at) "
            "VALUES (1, 'A100', '', '', CURRENT_TIMESTAMP)"
        )
        conn.exec_driver_sql(
            "INSERT INTO workload (id, key, operator, shape, dtype, layout, created_at) "
            "VALUES (1, 'mm/64/-', 'mm', '[64]', '', '', CURRENT_TIMESTAMP)"
        )
        conn.exec_driver_sql(
            "INSERT INTO job "
            "(id, workload_id, device_id, backend, strategy, batch_size, options, state, "
            "n_trials, clock_s, error, created_at) VALUES "
            "(1, 1, 1, 'replay', 'random', 1, '{}', 'queued', 0, 0, '', CURRENT_TIMESTAMP)"
        )
    engine.dispose()
    with TuningLog.open(db_url) as log:
        job = log.get_job(1)
        assert job is not None and job.cancel_requested is False and job.claimed_by is None
        assert log.claim_job("runner", 30) is not None
