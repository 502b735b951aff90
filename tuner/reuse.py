"""The tuning log as a measurement cache: a job does not measure what the log already holds.

:func:`reusable` gives a job its view of the log's trials of the job's workload and device with
the fingerprint the job's trials will have (same kernel template and toolchain:
``ktune.db.fingerprints``) recorded within a window (:data:`DEFAULT_WINDOW_S`; the job's
``reuse_window_s`` option changes it, 0 turns reuse off, as a CPU job on a noisy machine may
want). :class:`ReusingBackend` asks it, a batch at a time, for the configs it is about to
measure (an indexed lookup, so neither a job's start-up nor a batch grows with the log), and
answers those it finds from the log instead of measuring them: the strategy is told them as if
measured, the job records them as its own trials with ``reused_from`` naming the trial they
copy, and they cost no time on the job's clock. They count against the job's trial budget
(``--budget`` counts the trials a job records, measured or reused), so a job never records more
trials than asked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ktune.db import TrialRecord, TuningLog
from ktune.db.schema import utcnow
from ktune.search_space.parameters import Config
from ktune.tuner.measure.base import Backend, Measurement, Status, WrappingBackend

__all__ = ["DEFAULT_WINDOW_S", "Reusable", "ReusingBackend", "reusable"]

#: how old a trial may be to be reused by default: 30 days
DEFAULT_WINDOW_S = 30 * 86400.0


@dataclass(frozen=True)
class Reusable:
    """A job's view of the log as a measurement cache (see :func:`reusable`)."""

    tlog: TuningLog
    workload_id: int
    device_id: int
    fingerprint: str
    since: datetime
    job_id: int

    def find(self, config_keys: Sequence[str]) -> dict[str, TrialRecord]:
        """Config key -> the log's latest reusable trial, for those of ``config_keys`` it has."""
        return self.tlog.reusable_trials(
            self.workload_id,
            self.device_id,
            self.fingerprint,
            self.since,
            exclude_job=self.job_id,
            config_keys=config_keys,
        )


def reusable(
    tlog: TuningLog,
    workload_id: int,
    device_id: int,
    fingerprint: str,
    window_s: float | None,
    job_id: int,
) -> Reusable | None:
    """The job's view of the log's reusable trials (None when the window is 0 or the
    fingerprint unknown). Nothing is read until a batch asks."""
    window = DEFAULT_WINDOW_S if window_s is None else window_s
    if window <= 0 or not fingerprint:
        return None
    since = utcnow() - timedelta(seconds=window)
    return Reusable(tlog, workload_id, device_id, fingerprint, since, job_id)


class ReusingBackend(WrappingBackend):
    """``inner``, except that configs ``known`` finds in the log are answered from it."""

    def __init__(self, inner: Backend, known: Reusable, key: Callable[[Config], str]) -> None:
        super().__init__(inner)
        self._known = known
        self._key = key
        self.reused = 0

    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        keys = [self._key(c) for c in configs]
        logged = self._known.find(keys)
        found = [logged.get(k) for k in keys]
        fresh = [c for c, t in zip(configs, found) if t is None]
        measured = iter(self.inner.measure(fresh) if fresh else [])
        out = []
        for config, trial in zip(configs, found):
            if trial is None:
                out.append(next(measured))
                continue
            self.reused += 1
            out.append(
                Measurement(
                    config=config,
                    status=Status(trial.status),
                    time_ms=trial.time_ms,
                    times_ms=trial.times_ms,
                    compile_ms=trial.compile_ms,
                    bench_ms=trial.bench_ms,
                    cost_s=0.0,
                    error=trial.error,
                    extra={"reused_from": trial.id},
                )
            )
        return out
