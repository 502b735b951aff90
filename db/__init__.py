"""The tuning log: SQLAlchemy models, shipped Alembic migrations, and :class:`TuningLog`.

Exceptions::

    RuntimeError
     ├── DatabaseError      bad URL, unreachable server, schema newer than this ktune
     │    └── ConstraintError   a write broke a schema rule; nothing of it was written
     └── LeaseLost          a runner wrote to a job it no longer holds; nothing was written
    ValueError
     └── JobStateConflict   a job is not in a state that allows the request (e.g. cancel)

``db`` imports nothing else of ktune; every other package reads and writes the log
through :class:`TuningLog` and the records of ``ktune.db.records`` (build-time lookups may read it
through ``ktune.db.reader`` instead, which imports no SQLAlchemy).

The names below are imported on first use, so that ``import ktune.db.reader`` (and a process
that only looks configs up) does not load SQLAlchemy and Alembic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktune.db.engine import default_url, resolve_url
    from ktune.db.errors import ConstraintError, DatabaseError
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

_MODULES = {
    "ConstraintError": "errors",
    "DatabaseError": "errors",
    "default_url": "engine",
    "resolve_url": "engine",
    "JobStateConflict": "leases",
    "LeaseLost": "leases",
    "DeviceDistance": "lookup",
    "shape_distance": "lookup",
    "upgrade": "migrate",
    "TuningLog": "repository",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"ktune.db.{_MODULES.get(name, 'records')}"), name)
    globals()[name] = value
    return value
