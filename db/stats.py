"""Counts over the whole log, for the service's metrics."""

from __future__ import annotations

from sqlalchemy import Connection, func, select

from ktune.db.queries import job_t, trial_t

__all__ = ["jobs_by_state", "trials_by_status"]


def jobs_by_state(conn: Connection) -> dict[str, int]:
    rows = conn.execute(select(job_t.c.state, func.count()).group_by(job_t.c.state))
    return {state: int(n) for state, n in rows}


def trials_by_status(conn: Connection) -> dict[str, int]:
    """Trials measured by jobs (imports excluded), by status."""
    rows = conn.execute(
        select(trial_t.c.status, func.count())
        .where(trial_t.c.backend != "import")
        .group_by(trial_t.c.status)
    )
    return {status: int(n) for status, n in rows}
