"""Who is running a job: so that a job is never run by two processes at once.

A runner (the server's loop, ``ktune worker``) holds a job by its lease (``ktune.db.leases``). A job
run by ``ktune tune`` has no lease; it records its process as the job's holder
(``ktune-tune:<host>:<pid>``) when it starts. :func:`live_holder` tells whether a running
job's holder is provably alive: a lease that has not expired, or a ``ktune tune`` process on
this host that still exists. A job whose process died (``kill -9``, a power cut) keeps the
state ``running`` but no live holder, so it can be resumed at once.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime

from ktune.db import JobRecord

__all__ = ["dead_holder", "live_holder", "process_holder"]

_PREFIX = "ktune-tune"


def process_holder() -> str:
    """This process, as a job's holder."""
    return f"{_PREFIX}:{socket.gethostname()}:{os.getpid()}"


def live_holder(job: JobRecord, now: datetime | None = None) -> str | None:
    """What is running ``job`` now, in words, or ``None`` when nothing provably is."""
    if job.state != "running" or not job.claimed_by:
        return None
    if job.lease_until is not None:
        now = now or datetime.now(UTC)
        if job.lease_until > now:
            return f"runner {job.claimed_by}, lease until {job.lease_until:%Y-%m-%d %H:%M:%S} UTC"
        return None
    pid = _local_process(job.claimed_by)
    if pid is None or pid == os.getpid() or not _alive(pid):
        return None
    return f"ktune tune, process {pid}"


def dead_holder(job: JobRecord) -> bool:
    """Whether ``job`` is running without a lease and its ``ktune tune`` process, on this
    host, provably no longer exists (``kill -9``). A process on another host may be alive:
    not provably dead."""
    if job.state != "running" or job.lease_until is not None or not job.claimed_by:
        return False
    pid = _local_process(job.claimed_by)
    return pid is not None and pid != os.getpid() and not _alive(pid)


def _local_process(holder: str) -> int | None:
    """The pid of a ``ktune tune`` holder on this host, else ``None``."""
    prefix, _, rest = holder.partition(":")
    host, _, pid_text = rest.rpartition(":")
    if prefix != _PREFIX or host != socket.gethostname() or not pid_text.isdigit():
        return None
    return int(pid_text)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True
