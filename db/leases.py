"""Job leases: runners claim queued jobs atomically, keep them alive, and give them back.

A runner (the server's background loop or ``ktune worker``) claims a job by moving it from
``queued`` to ``running`` with its name in ``claimed_by`` and a lease deadline in
``lease_until``, which it renews while it works. A running job whose lease has expired (its
runner died) is claimable again and is resumed from its trials. Claims are atomic:
PostgreSQL locks the candidate row with ``FOR UPDATE SKIP LOCKED``; SQLite, which serialises
writers, uses an UPDATE conditioned on the row still being claimable and checks the rowcount.

Jobs run by ``ktune tune`` have no lease and are never claimed while running; their process
is in ``claimed_by`` and reads ``cancel_requested`` after each batch, as a runner does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    false,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy import func as sqlfunc

from ktune.db.queries import job_t
from ktune.db.records import JobControl
from ktune.db.schema import UTCDateTime

__all__ = [
    "JobStateConflict",
    "LeaseLost",
    "cancel_unheld",
    "claim",
    "control",
    "hold",
    "release",
    "renew",
    "retry",
    "request_cancel",
]

_CANDIDATES = 8  # SQLite: claimable rows looked at per claim before giving up for this round


class LeaseLost(RuntimeError):
    """A runner wrote to a job it no longer holds (its lease expired and another took it)."""


class JobStateConflict(ValueError):
    """A job is not in a state that allows what was asked (e.g. cancelling a finished job)."""


def _claimable(now: datetime) -> ColumnElement[bool]:
    expired = and_(
        job_t.c.state == "running", job_t.c.lease_until.is_not(None), job_t.c.lease_until < now
    )
    return or_(job_t.c.state == "queued", expired)


def claim(
    conn: Connection,
    owner: str,
    lease_s: float,
    now: datetime,
    backends: Sequence[str] | None = None,
) -> int | None:
    """Claim the oldest claimable job for ``owner``; its id, or None when there is none.

    ``backends``: only jobs measured by one of these (a runner without a GPU leaves ``cupy``
    jobs to one that has it); None: any.
    """
    values = {
        "state": "running",
        "claimed_by": owner,
        "lease_until": now + timedelta(seconds=lease_s),
        "heartbeat_at": now,
        "started_at": sqlfunc.coalesce(job_t.c.started_at, literal(now, UTCDateTime())),
        "finished_at": None,
        "warning": "",  # a note of why it waited, if any
    }
    candidates = select(job_t.c.id).where(_claimable(now)).order_by(job_t.c.id)
    if backends is not None:
        candidates = candidates.where(job_t.c.backend.in_(list(backends)))
    if conn.dialect.name == "postgresql":
        job_id = conn.execute(candidates.limit(1).with_for_update(skip_locked=True)).scalar()
        if job_id is None:
            return None
        conn.execute(update(job_t).where(job_t.c.id == job_id).values(values))
        return int(job_id)
    for job_id in conn.execute(candidates.limit(_CANDIDATES)).scalars().all():
        stmt = update(job_t).where(job_t.c.id == job_id, _claimable(now)).values(values)
        if conn.execute(stmt).rowcount == 1:
            return int(job_id)
    return None


def renew(
    conn: Connection, owner: str, job_ids: Sequence[int], lease_s: float, now: datetime
) -> set[int]:
    """Extend ``owner``'s leases on ``job_ids``; returns the ids it still holds."""
    if not job_ids:
        return set()
    stmt = (
        update(job_t)
        .where(
            job_t.c.id.in_(list(job_ids)),
            job_t.c.claimed_by == owner,
            job_t.c.state == "running",
        )
        .values(lease_until=now + timedelta(seconds=lease_s), heartbeat_at=now)
        .returning(job_t.c.id)
    )
    return {int(i) for i in conn.execute(stmt).scalars()}


def hold(conn: Connection, owner: str, job_id: int, now: datetime) -> bool:
    """Whether ``owner`` still holds ``job_id`` (running, claimed by it); on PostgreSQL the
    job's row stays locked until the transaction ends, so no claim can take it meanwhile."""
    params = {"job_id": job_id, "owner": owner, "now": now}
    return conn.execute(_HOLD, params).rowcount == 1


#: :func:`hold`'s statement, built once: it runs with every batch of trials a runner writes
_HOLD = (
    update(job_t)
    .where(
        job_t.c.id == bindparam("job_id"),
        job_t.c.claimed_by == bindparam("owner"),
        job_t.c.state == "running",
    )
    .values(heartbeat_at=bindparam("now", type_=UTCDateTime()))
)


def retry(conn: Connection, owner: str, job_id: int, error: str, max_retries: int) -> bool:
    """Requeue a job ``owner`` holds (running, or just marked failed by it) after a failure
    of the infrastructure, counting the retry; False once it was retried ``max_retries``
    times, or when ``owner`` no longer holds it."""
    stmt = (
        update(job_t)
        .where(
            job_t.c.id == job_id,
            job_t.c.claimed_by == owner,
            job_t.c.state.in_(["running", "failed"]),
            job_t.c.retries < max_retries,
            job_t.c.cancel_requested == false(),
        )
        .values(
            state="queued",
            claimed_by=None,
            lease_until=None,
            finished_at=None,
            error=error,
            retries=job_t.c.retries + 1,
        )
    )
    return conn.execute(stmt).rowcount == 1


def release(conn: Connection, owner: str, job_id: int) -> bool:
    """Put a job ``owner`` holds back in the queue (a runner shutting down); False if not held."""
    stmt = (
        update(job_t)
        .where(job_t.c.id == job_id, job_t.c.claimed_by == owner, job_t.c.state == "running")
        .values(state="queued", claimed_by=None, lease_until=None)
    )
    return conn.execute(stmt).rowcount == 1


def control(conn: Connection, job_id: int) -> JobControl | None:
    row = conn.execute(
        select(job_t.c.state, job_t.c.claimed_by, job_t.c.cancel_requested).where(
            job_t.c.id == job_id
        )
    ).first()
    return (
        None if row is None else JobControl(row.state, row.claimed_by, bool(row.cancel_requested))
    )


def request_cancel(conn: Connection, job_id: int, now: datetime) -> None:
    """Cancel a job: at once when queued, abandoned (lease expired) or held by nobody, else
    ask its holder (a runner, or a ``ktune tune`` process) to stop after its current batch.

    Raises LookupError for an unknown job and :class:`JobStateConflict` for a finished one.
    """
    finish = {"state": "cancelled", "finished_at": now, "cancel_requested": True}
    queued = update(job_t).where(job_t.c.id == job_id, job_t.c.state == "queued")
    if conn.execute(queued.values(finish)).rowcount == 1:
        return
    running = (job_t.c.id == job_id, job_t.c.state == "running")
    abandoned = update(job_t).where(
        *running, or_(job_t.c.lease_until < now, job_t.c.claimed_by.is_(None))
    )
    if (
        conn.execute(abandoned.values({**finish, "claimed_by": None, "lease_until": None})).rowcount
        == 1
    ):
        return
    held = update(job_t).where(*running)
    if conn.execute(held.values(cancel_requested=True)).rowcount == 1:
        return
    current = control(conn, job_id)
    if current is None:
        raise LookupError(f"no job {job_id}")
    raise JobStateConflict(f"job {job_id} is already {current.state}")


def cancel_unheld(conn: Connection, job_id: int, holder: str, now: datetime) -> bool:
    """Cancel at once a running job whose lease-less holder (a ``ktune tune`` process) is
    known to be dead, unless another process has taken it since; True when cancelled."""
    stmt = (
        update(job_t)
        .where(
            job_t.c.id == job_id,
            job_t.c.state == "running",
            job_t.c.claimed_by == holder,
            job_t.c.lease_until.is_(None),
        )
        .values(state="cancelled", finished_at=now, cancel_requested=True, claimed_by=None)
    )
    return conn.execute(stmt).rowcount == 1
