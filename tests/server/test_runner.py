"""The job runner: many runners on one log never run a job twice; leases; shutdown; cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ktune.db import LeaseLost, TrialIn, TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job
from ktune.tuner.loop import Stop
from ktune.tuner.runner import Runner
from ktune.tuner.sources import ReplaySource, bundled_recordings

pytestmark = pytest.mark.both_databases  # leases and concurrent claims on each backend

CONV = bundled_recordings()["convolution_A4000"]


def queue(
    tlog: TuningLog, n: int, budget: int = 15, speed: float | None = None, batch: int = 1
) -> list[int]:
    source = ReplaySource.open(CONV, speed=speed)
    return [
        create_job(
            tlog, JobRequest(source, "random", Budget(max_trials=budget), seed=i, batch_size=batch)
        ).id
        for i in range(n)
    ]


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.02)


def test_concurrent_claims_never_hand_out_a_job_twice(db_url: str) -> None:
    with TuningLog.open(db_url) as setup:
        ids = queue(setup, 12)
    logs = [TuningLog.open(db_url) for _ in range(4)]  # one engine each, as separate processes have
    claimed: list[tuple[str, int]] = []
    barrier = threading.Barrier(len(logs))

    def claim_all(tlog: TuningLog, owner: str) -> None:
        barrier.wait()
        while (job := tlog.claim_job(owner, 60)) is not None:
            claimed.append((owner, job.id))

    threads = [
        threading.Thread(target=claim_all, args=(t, f"runner-{i}")) for i, t in enumerate(logs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(job for _, job in claimed) == ids
    with TuningLog.open(db_url) as check:
        for owner, job_id in claimed:
            job = check.get_job(job_id)
            assert job is not None and job.state == "running" and job.claimed_by == owner
    for log in logs:
        log.close()


def test_several_runners_share_the_queue_and_run_each_job_once(db_url: str) -> None:
    with TuningLog.open(db_url) as setup:
        ids = queue(setup, 6, budget=15)
    logs = [TuningLog.open(db_url) for _ in range(3)]
    runners = [Runner(t, concurrency=2, lease_s=10, poll_s=0.02, drain=True) for t in logs]
    for r in runners:
        r.start()
    for r in runners:
        assert r.wait(60)
    with TuningLog.open(db_url) as check:
        for job_id in ids:
            job = check.get_job(job_id)
            trials = check.job_trials(job_id)
            assert job is not None and job.state == "done", job
            assert [t.seq for t in trials] == list(range(15))
            assert len({t.config_key for t in trials}) == 15
        holders = {str(check.get_job(i).claimed_by).split("#")[0] for i in ids}  # type: ignore[union-attr]
        assert holders <= {r.name for r in runners}
    for r, t in zip(runners, logs):
        r.stop(1)
        t.close()


def test_an_expired_lease_is_claimed_again_and_the_old_holder_is_fenced_off(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        (job_id,) = queue(tlog, 1)
        job = tlog.get_job(job_id)
        assert tlog.claim_job("dead", 0.2) is not None
        assert tlog.claim_job("alive", 60) is None  # the lease still holds
        time.sleep(0.3)
        taken = tlog.claim_job("alive", 60)
        assert taken is not None and taken.id == job_id and taken.claimed_by == "alive"
        dead = tlog.for_runner("dead")
        trial = TrialIn(config={"x": 1}, config_key="x=1", status="ok", time_ms=1.0, seq=0)
        with pytest.raises(LeaseLost):
            dead.add_trials(job_id, job.spec.workload_id, job.spec.device_id, "replay", [trial])  # type: ignore[union-attr]
        with pytest.raises(LeaseLost):
            dead.set_job_state(job_id, "failed", error="zombie")
        assert tlog.job_trials(job_id) == [] and tlog.get_job(job_id).state == "running"  # type: ignore[union-attr]
        alive = tlog.for_runner("alive")
        alive.add_trials(job_id, job.spec.workload_id, job.spec.device_id, "replay", [trial])  # type: ignore[union-attr]
        assert tlog.get_job(job_id).n_trials == 1  # type: ignore[union-attr]
        with pytest.raises(LookupError):
            alive.set_job_state(987654, "done")


def test_a_live_runner_keeps_its_job_past_the_lease_length(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        # About 6 s of replayed time at this speed, with a lease of 2 s renewed every 2/3 s: the
        # thief tries for longer than a lease. (A 0.6 s lease was lost to scheduling delays on a
        # loaded 2-core CI machine: a renewal came more than 0.4 s late.)
        (job_id,) = queue(tlog, 1, budget=60, speed=25)
        runner = Runner(tlog, lease_s=2.0, poll_s=0.02, drain=True)
        runner.start()
        wait_for(lambda: tlog.get_job(job_id).state == "running")  # type: ignore[union-attr]
        thief = None
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and thief is None:
            thief = tlog.claim_job("thief", 60)
            time.sleep(0.05)
        assert thief is None
        assert runner.wait(30)
        job = tlog.get_job(job_id)
        assert job is not None and job.state == "done" and job.n_trials == 60


def test_stopping_a_runner_requeues_its_job_and_another_resumes_it(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        (job_id,) = queue(tlog, 1, budget=80, speed=200, batch=2)
        first = Runner(tlog, lease_s=30, poll_s=0.02)
        first.start()
        wait_for(lambda: tlog.get_job(job_id).n_trials >= 10)  # type: ignore[union-attr]
        first.stop(10)
        job = tlog.get_job(job_id)
        assert (
            job is not None and job.state == "queued" and job.claimed_by is None and job.error == ""
        )
        stopped_at = job.n_trials
        assert 10 <= stopped_at < 80
        second = Runner(tlog, lease_s=30, poll_s=0.02, drain=True)
        second.start()
        assert second.wait(60)
        job = tlog.get_job(job_id)
        trials = tlog.job_trials(job_id)
        assert job is not None and job.state == "done"
        assert str(job.claimed_by).startswith(f"{second.name}#")
        assert [t.seq for t in trials] == list(range(80)) and len(
            {t.config_key for t in trials}
        ) == 80


def test_a_job_cancelled_before_its_runner_stops_ends_cancelled_not_queued(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        (job_id,) = queue(tlog, 1, budget=2000, speed=200, batch=2)
        runner = Runner(tlog, lease_s=30, poll_s=0.02)
        runner.start()
        wait_for(lambda: tlog.get_job(job_id).n_trials >= 4)  # type: ignore[union-attr]
        tlog.request_cancel(job_id)
        runner.stop(10)  # at once: the cancel and the shutdown reach the same batch
        job = tlog.get_job(job_id)
        assert job is not None and job.state == "cancelled" and job.finished_at is not None


def test_a_job_that_cannot_start_is_marked_failed_and_the_runner_goes_on(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        ids = queue(tlog, 2, budget=5)
        # A recording changed since the job was queued: its digest no longer matches.
        bad = tlog.get_job(ids[0])
        assert bad is not None
        from sqlalchemy import update

        from ktune.db.queries import job_t

        with tlog._write() as conn:
            conn.execute(
                update(job_t)
                .where(job_t.c.id == ids[0])
                .values(options={**bad.spec.options, "digest": "0" * 64})
            )
        runner = Runner(tlog, poll_s=0.02, drain=True)
        runner.start()
        assert runner.wait(30)
        failed, done = tlog.get_job(ids[0]), tlog.get_job(ids[1])
        assert (
            failed is not None and failed.state == "failed" and "recording changed" in failed.error
        )
        assert done is not None and done.state == "done" and done.n_trials == 5


class StallingRunner(Runner):
    """A runner that stalls once, for ``stall_s``, as a whole process does under SIGSTOP or a
    long GC pause: its slot between two batches and its heartbeat at the same time."""

    def __init__(self, tlog: TuningLog, stall_after: int, stall_s: float, **kw: Any) -> None:
        super().__init__(tlog, **kw)
        self.stall_after, self.stall_s = stall_after, stall_s
        self.stalled = threading.Event()
        self.resumed = threading.Event()
        self._quiet = threading.Event()
        renew = tlog.renew_leases

        def stalled_renew(owner: str, job_ids: Sequence[int], lease_s: float) -> set[int]:
            while self._quiet.is_set():  # the heartbeat is paused with the rest of the process
                time.sleep(0.01)
            return renew(owner, job_ids, lease_s)

        tlog.renew_leases = stalled_renew  # type: ignore[method-assign]

    def _check(self, job_id: int, *args: Any) -> Stop | None:
        job = self._tlog.get_job(job_id)
        if not self.stalled.is_set() and job is not None and job.n_trials >= self.stall_after:
            self.stalled.set()
            self._quiet.set()
            time.sleep(self.stall_s)
            self._quiet.clear()
            self.resumed.set()
        return super()._check(job_id, *args)


def test_a_stall_longer_than_the_lease_loses_the_job_to_a_sibling_which_finishes_it(
    db_url: str,
) -> None:
    """A paused runner whose idle slot re-claims its sibling's job: the stalled slot must
    write nothing more, and the job must end done with every trial once, never failed."""
    with TuningLog.open(db_url) as tlog:
        (job_id,) = queue(tlog, 1, budget=40, speed=400)
        runner = StallingRunner(
            tlog, stall_after=5, stall_s=1.5, concurrency=2, lease_s=0.5, poll_s=0.02
        )
        runner.start()
        try:
            # Until the job ended and the stalled slot, awake again, has let go of it.
            wait_for(
                lambda: (
                    runner.resumed.is_set()
                    and not runner.status().running
                    and tlog.get_job(job_id).state in FINAL
                ),  # type: ignore[union-attr]
                timeout=60,
            )
            time.sleep(0.2)
        finally:
            runner.stop(5)
        job = tlog.get_job(job_id)
        trials = tlog.job_trials(job_id)
        assert job is not None and job.state == "done", (job.state if job else None, job)
        assert job.error == "" and job.n_trials == 40
        assert [t.seq for t in trials] == list(range(40))
        assert len({t.config_key for t in trials}) == 40


FINAL = ("done", "failed", "cancelled")


def test_an_infrastructure_failure_requeues_the_job_until_a_limit(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ktune.tuner import runner as runner_module

    real = runner_module.run_job
    calls: dict[int, int] = {}

    def flaky(tlog: TuningLog, job_id: int, **kw: Any) -> Any:
        calls[job_id] = calls.get(job_id, 0) + 1
        if job_id == always or calls[job_id] == 1:
            raise OSError(28, "No space left on device")
        return real(tlog, job_id, **kw)

    with TuningLog.open(db_url) as tlog:
        once, always = queue(tlog, 2, budget=5)
        monkeypatch.setattr(runner_module, "run_job", flaky)
        runner = Runner(tlog, poll_s=0.02, drain=True, max_retries=2)
        runner.start()
        assert runner.wait(30)
        healed, broken = tlog.get_job(once), tlog.get_job(always)
        assert healed is not None and healed.state == "done" and healed.n_trials == 5
        assert broken is not None and broken.state == "failed"
        assert "No space left" in broken.error and "after 2 retries" in broken.error
        assert calls == {once: 2, always: 3}


def test_a_queued_job_no_runner_takes_says_why_until_one_claims_it(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        (job_id,) = queue(tlog, 1, budget=3)
        cpu_only = Runner(tlog, poll_s=0.02, backends=("cpu",), name="cpu-box")
        cpu_only.start()
        try:
            wait_for(lambda: bool(tlog.get_job(job_id).warning))  # type: ignore[union-attr]
        finally:
            cpu_only.stop(5)
        job = tlog.get_job(job_id)
        assert job is not None and job.state == "queued"
        assert job.warning == "waiting for a runner of the 'replay' backend: cpu-box runs cpu"
        replayer = Runner(tlog, poll_s=0.02, backends=("replay",), drain=True)
        replayer.start()
        assert replayer.wait(30)
        done = tlog.get_job(job_id)
        assert done is not None and done.state == "done" and done.warning == ""
