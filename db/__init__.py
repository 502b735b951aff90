"""The tuning log: SQLAlchemy models, shipped Alembic migrations, and :class:`TuningLog`.

Exceptions::

    RuntimeError
     └── DatabaseError      bad URL, unreachable server, schema newer than this ktune
          └── ConstraintError   a write broke a schema rule; nothing of it was written

``db`` imports nothing else of ktune; every other package reads and writes the log
through :class:`TuningLog` and the records of ``db.records``.
"""

from __future__ import annotations

from db.engine import ConstraintError, DatabaseError, default_url, resolve_url
from db.migrate import upgrade
from db.records import (
    JOB_STATES,
    TRIAL_STATUSES,
    BestRecord,
    DeviceRecord,
    JobRecord,
    JobSpec,
    TrialIn,
    TrialRecord,
    WorkloadRecord,
)
from db.repository import TuningLog

__all__ = [
    "JOB_STATES",
    "TRIAL_STATUSES",
    "BestRecord",
    "ConstraintError",
    "DatabaseError",
    "DeviceRecord",
    "JobRecord",
    "JobSpec",
    "TrialIn",
    "TrialRecord",
    "TuningLog",
    "WorkloadRecord",
    "default_url",
    "resolve_url",
    "upgrade",
]
