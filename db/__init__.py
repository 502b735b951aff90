"""The tuning log: SQLAlchemy models, shipped Alembic migrations, and :class:`TuningLog`.

Exceptions::

    RuntimeError
     ├── DatabaseError      bad URL, unreachable server, schema newer than this ktune
     │    └── ConstraintError   a write broke a schema rule; nothing of it was written
     └── LeaseLost          a runner wrote to a job it no longer holds; nothing was written
    ValueError
     └── JobStateConflict   a job is not in a state that allows the request (e.g. cancel)

``db`` imports nothing else of ktune; every other package reads and writes the log
through :class:`TuningLog` and the records of ``db.records``.
"""

from __future__ import annotations

from ktune.db.engine import ConstraintError, DatabaseError, default_url, resolve_url
from ktune.db.leases import JobStateConflict, LeaseLost
from ktune.db.lookup import DeviceDistance, shape_distance
from ktune.db.migrate import upgrade
from ktune.db.records import (
    JOB_STATES,
    LOOKUP_TIERS,
    TRIAL_STATUSES,
    BestRecord,
    DeviceRecord,
    JobControl,
    JobRecord,
    JobSpec,
    LookupQuery,
    LookupResult,
    TokenRecord,
    TrialIn,
    TrialOutcome,
    TrialRecord,
    WorkloadRecord,
)
from ktune.db.repository import TuningLog

__all__ = [
    "JOB_STATES",
    "LOOKUP_TIERS",
    "TRIAL_STATUSES",
    "BestRecord",
    "ConstraintError",
    "DatabaseError",
    "DeviceDistance",
    "DeviceRecord",
    "JobControl",
    "JobRecord",
    "JobSpec",
    "JobStateConflict",
    "LeaseLost",
    "LookupQuery",
    "LookupResult",
    "TokenRecord",
    "TrialIn",
    "TrialOutcome",
    "TrialRecord",
    "TuningLog",
    "WorkloadRecord",
    "default_url",
    "resolve_url",
    "shape_distance",
    "upgrade",
]
