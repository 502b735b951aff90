"""Read-only queries of the dashboard and of scripts that browse the log: jobs filtered by
workload, device, strategy and state with a count per state, the values those filters take, and
the narrow trial columns that best-so-far curves need.

:class:`LogBrowser` reads through a :class:`~ktune.db.TuningLog`'s connections; it writes
nothing. The filters are exact matches, combined with AND.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, func, select

from ktune.db.queries import check_state, device_t, job_t, jobs_query, to_job, trial_t, workload_t
from ktune.db.records import JobRecord

if TYPE_CHECKING:
    from ktune.db.repository import TuningLog

__all__ = ["Facets", "JobFilter", "LogBrowser", "TrialPoint"]

#: ids per ``IN (...)`` query (well under SQLite's bound-parameter limit)
_ID_CHUNK = 500
#: most distinct values a facet lists (the page offers them as choices)
MAX_FACET_VALUES = 1000


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: each field given must match exactly."""

    state: str | None = None
    workload: str | None = None
    device: str | None = None
    strategy: str | None = None
    backend: str | None = None

    def apply(self, query: Select[Any], *, state: bool = True) -> Select[Any]:
        """``query`` (joined with workload and device) narrowed to these jobs; ``state=False``
        leaves the state out (for counts by state under the other filters)."""
        if state and self.state is not None:
            check_state(self.state)
            query = query.where(job_t.c.state == self.state)
        if self.workload is not None:
            query = query.where(workload_t.c.key == self.workload)
        if self.device is not None:
            query = query.where(device_t.c.name == self.device)
        if self.strategy is not None:
            query = query.where(job_t.c.strategy == self.strategy)
        if self.backend is not None:
            query = query.where(job_t.c.backend == self.backend)
        return query


@dataclass(frozen=True)
class Facets:
    """The values the job filters take over the whole log, each sorted, and jobs by state
    under a filter (its state left out)."""

    by_state: dict[str, int]
    workloads: list[str]
    devices: list[str]
    strategies: list[str]
    backends: list[str]


@dataclass(frozen=True)
class TrialPoint:
    """What a best-so-far curve needs of a trial: its position, status, time and clock."""

    seq: int
    status: str
    time_ms: float | None
    clock_s: float


def _joined(*columns: Any) -> Select[Any]:
    return (
        select(*columns)
        .select_from(job_t)
        .join(workload_t, job_t.c.workload_id == workload_t.c.id)
        .join(device_t, job_t.c.device_id == device_t.c.id)
    )


def _distinct(column: Any) -> Select[Any]:
    """The values ``column`` takes among the jobs, sorted, at most MAX_FACET_VALUES."""
    return _joined(column).distinct().order_by(column).limit(MAX_FACET_VALUES)


class LogBrowser:
    """The dashboard's read-only queries over ``tlog``."""

    def __init__(self, tlog: TuningLog) -> None:
        self._tlog = tlog

    def jobs(self, where: JobFilter, *, limit: int = 100, offset: int = 0) -> list[JobRecord]:
        """Jobs matching ``where``, newest first, ``limit`` of them from ``offset``."""
        query = where.apply(jobs_query()).order_by(job_t.c.id.desc()).limit(limit).offset(offset)
        with self._tlog._read() as conn:
            return [to_job(row) for row in conn.execute(query)]

    def count(self, where: JobFilter) -> int:
        """How many jobs match ``where``."""
        with self._tlog._read() as conn:
            return int(conn.execute(where.apply(_joined(func.count()))).scalar_one())

    def facets(self, where: JobFilter) -> Facets:
        """Jobs matching ``where`` (but any state) by state, and every value each filter takes."""
        counts = where.apply(_joined(job_t.c.state, func.count()), state=False).group_by(
            job_t.c.state
        )

        columns = (workload_t.c.key, device_t.c.name, job_t.c.strategy, job_t.c.backend)
        with self._tlog._read() as conn:
            by_state = {str(s): int(n) for s, n in conn.execute(counts)}
            values = [[str(v) for (v,) in conn.execute(_distinct(column))] for column in columns]
        return Facets(by_state, *values)

    def trial_points(self, job_ids: Sequence[int]) -> dict[int, list[TrialPoint]]:
        """Job id -> its trials as :class:`TrialPoint`, in measurement order (imports, which
        have no position, are left out)."""
        out: dict[int, list[TrialPoint]] = {int(i): [] for i in job_ids}
        c = trial_t.c
        wanted = sorted(out)
        with self._tlog._read() as conn:
            for start in range(0, len(wanted), _ID_CHUNK):
                query = (
                    select(c.job_id, c.seq, c.status, c.time_ms, c.clock_s)
                    .where(c.job_id.in_(wanted[start : start + _ID_CHUNK]), c.seq.is_not(None))
                    .order_by(c.job_id, c.seq)
                )
                for row in conn.execute(query):
                    out[row.job_id].append(
                        TrialPoint(row.seq, row.status, row.time_ms, row.clock_s)
                    )
        return out
