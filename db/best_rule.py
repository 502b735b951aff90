"""Which ``ok`` trial is the best config of a (workload, device): the rule, and its lock.

The rule, applied to the ok trials of a pair in the order they were recorded (their ids): a
trial replaces the best when its parameter names differ from the best's, whatever its time
(the kernel's interface changed: a knob was added or removed, so the old times are not
comparable and the old config no longer fits the kernel); likewise when it has a known
fingerprint (``ktune.db.fingerprints``: kernel template and toolchain) other than the best's
(the old times were measured under another kernel or toolchain); a trial of unknown
fingerprint (an import) never replaces a best of a known one; otherwise a trial replaces the
best only when it is strictly faster. So the best has the parameter names and the fingerprint
of the latest fingerprinted ok trial, and is the fastest (the first on ties) of the trials
recorded since either last changed. A job's confirmation (``TuningLog.confirm``) then sets
the best to the winner of its re-measurement, whatever the rule made of single measurements.

``add_trials`` applies the rule to each batch (:func:`batch_candidate`) against the stored
best while holding :func:`lock_pair`, so that concurrent writers of a pair take effect in
the order of their trial ids, as a replay of the whole history would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, text

from ktune.db.fingerprints import fingerprint
from ktune.db.records import TrialIn

__all__ = ["Candidate", "batch_candidate", "lock_pair", "param_names", "replaces"]

_LOCK_NAMESPACE = "ktune best_config"


def param_names(config: dict[str, Any]) -> frozenset[str]:
    """The interface a config was measured with: its parameter names."""
    return frozenset(config)


def replaces(
    new_time: float,
    new_config: dict[str, Any],
    time_ms: float,
    config: dict[str, Any],
    new_fingerprint: str = "",
    fingerprint: str = "",
) -> bool:
    """Whether a trial (``new_time``, ``new_config``, ``new_fingerprint``) recorded after the
    best (``time_ms``, ``config``, ``fingerprint``) replaces it."""
    if param_names(new_config) != param_names(config):
        return True
    if new_fingerprint != fingerprint:
        return bool(new_fingerprint)
    return new_time < time_ms


class Candidate(NamedTuple):
    """What a batch makes of the best: its last interface's fastest trial, and whether that
    interface started inside the batch (then it replaces the stored best unconditionally)."""

    trial_id: int
    time_ms: float
    config: dict[str, Any]
    restarted: bool
    fingerprint: str = ""

    def displaces(self, time_ms: float, config: dict[str, Any], fingerprint: str = "") -> bool:
        """Whether this candidate replaces a stored best recorded before the batch."""
        return self.restarted or replaces(
            self.time_ms, self.config, time_ms, config, self.fingerprint, fingerprint
        )


def batch_candidate(trials: Sequence[TrialIn], ids: Sequence[int]) -> Candidate | None:
    """The rule folded over the batch's ok trials in order; None when it has none."""
    best: Candidate | None = None
    for trial, trial_id in zip(trials, ids):
        if trial.status != "ok" or trial.time_ms is None:
            continue
        mark = fingerprint(trial.toolchain)
        if best is None:
            best = Candidate(trial_id, trial.time_ms, trial.config, False, mark)
        elif param_names(trial.config) != param_names(best.config) or (
            mark != best.fingerprint and mark
        ):
            best = Candidate(trial_id, trial.time_ms, trial.config, True, mark)
        elif mark == best.fingerprint and trial.time_ms < best.time_ms:
            best = best._replace(trial_id=trial_id, time_ms=trial.time_ms, config=trial.config)
    return best


def lock_pair(conn: Connection, workload_id: int, device_id: int) -> None:
    """Serialise the writers of one (workload, device) until the transaction ends.

    Taken before the trials get their ids, so the writers of a pair commit in id order. On
    PostgreSQL, a transaction-level advisory lock (keys that collide only cost some waiting);
    SQLite needs none: a write transaction holds the database's write lock from its first
    insert to its commit.
    """
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.blake2b(f"{_LOCK_NAMESPACE} {workload_id} {device_id}".encode(), digest_size=8)
    key = int.from_bytes(digest.digest(), "big", signed=True)
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
