"""SQLAlchemy models of the tuning log.

The schema is created and upgraded by the Alembic migrations in ``db/migrations``; these
models are its single description, and a test checks that the two agree. Only
``db/repository.py`` queries them; everything else sees the records of ``db/records.py``.

Tables: ``device`` and ``workload`` (what is tuned where), ``job`` (one tuning run, with
the lease of the runner that holds it), ``trial`` (one measured configuration, with or
without a job), ``best_config`` (the best ``ok`` trial per workload and device, kept current
as trials land) and ``api_token`` (hashed bearer tokens of the REST service).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from ktune.db.records import JOB_STATES, TRIAL_STATUSES

__all__ = [
    "ApiToken",
    "Base",
    "BestConfig",
    "Device",
    "Job",
    "Trial",
    "UTCDateTime",
    "Workload",
    "utcnow",
]

# Stable constraint names, identical on SQLite and PostgreSQL, so that later migrations
# can refer to them by name.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are stored as
    naive UTC and given their zone back when read.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the tuning log stores aware UTC times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    # none_as_null: a Python None is SQL NULL (testable with IS NULL), never JSON 'null'.
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(none_as_null=True),
        float: Double(),
    }


class Device(Base):
    __tablename__ = "device"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    vendor: Mapped[str] = mapped_column(default="")
    architecture: Mapped[str] = mapped_column(default="")
    spec: Mapped[dict[str, Any] | None]
    # The latest toolchain its fingerprinted trials ran under (db/fingerprints.py): what a
    # lookup compares a best config's toolchain with to tell it stale.
    toolchain: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Workload(Base):
    __tablename__ = "workload"
    __table_args__ = (Index(None, "operator"),)  # lookups by operator (nearest tuned shape)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(unique=True)
    operator: Mapped[str]
    shape: Mapped[list[int]] = mapped_column(JSON)
    dtype: Mapped[str] = mapped_column(default="")
    layout: Mapped[str] = mapped_column(default="")
    space: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(Base):
    __tablename__ = "job"
    __table_args__ = (CheckConstraint(_in("state", JOB_STATES), name="state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workload.id"), index=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("device.id"))
    backend: Mapped[str]
    strategy: Mapped[str]
    seed: Mapped[int | None]
    batch_size: Mapped[int]
    budget_trials: Mapped[int | None]
    budget_seconds: Mapped[float | None]
    target_ms: Mapped[float | None]
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)
    state: Mapped[str] = mapped_column(index=True)
    n_trials: Mapped[int] = mapped_column(default=0)
    # job -> trial -> job is a cycle: this side is added after both tables exist.
    best_trial_id: Mapped[int | None] = mapped_column(
        ForeignKey("trial.id", use_alter=True, ondelete="SET NULL")
    )
    best_time_ms: Mapped[float | None]
    clock_s: Mapped[float] = mapped_column(default=0.0)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    # The runner holding a job (server or ``ktune worker``) and until when; a running job
    # whose lease has expired is claimed again. Jobs run by ``ktune tune`` have no lease.
    claimed_by: Mapped[str | None]
    lease_until: Mapped[datetime | None]
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Times runners put the job back in the queue after an infrastructure failure (its
    # database, its host), not one of its own: they give up past a limit.
    retries: Mapped[int] = mapped_column(default=0, server_default="0")
    # An import job's content hash: a recording is imported once, by one transaction.
    import_digest: Mapped[str | None] = mapped_column(unique=True)
    # Why its answer may not be trusted: repeated runs too noisy for the differences measured.
    warning: Mapped[str] = mapped_column(Text, default="", server_default="")


class Trial(Base):
    __tablename__ = "trial"
    __table_args__ = (
        CheckConstraint(_in("status", TRIAL_STATUSES), name="status"),
        # A job never measures the same config twice nor writes a batch twice. Imported
        # trials have no job; NULLs are distinct, so they are not constrained here.
        UniqueConstraint("job_id", "config_key"),
        UniqueConstraint("job_id", "seq"),  # its index also serves job_trials()
        # the prior's newest trials of a group, and its counts by device (from the index)
        Index(None, "workload_id", "device_id", "id"),
        # the log as a measurement cache: the configs a batch is about to measure
        Index(None, "workload_id", "device_id", "config_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("job.id"))
    workload_id: Mapped[int] = mapped_column(ForeignKey("workload.id"))
    device_id: Mapped[int] = mapped_column(ForeignKey("device.id"))
    backend: Mapped[str]
    seq: Mapped[int | None]
    config: Mapped[dict[str, Any]]
    config_key: Mapped[str]
    status: Mapped[str]
    time_ms: Mapped[float | None]
    times: Mapped[list[float]] = mapped_column(JSON, default=list)
    compile_ms: Mapped[float] = mapped_column(default=0.0)
    bench_ms: Mapped[float] = mapped_column(default=0.0)
    error: Mapped[str] = mapped_column(Text, default="")
    strategy: Mapped[str] = mapped_column(default="")
    predicted: Mapped[float | None]
    clock_s: Mapped[float] = mapped_column(default=0.0)
    toolchain: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # db/fingerprints.py: the kernel template and toolchain facets of ``toolchain``, hashed
    fingerprint: Mapped[str] = mapped_column(default="", server_default="")
    # the trial (of an earlier job) whose measurement this one reuses instead of measuring
    reused_from: Mapped[int | None]
    # confirmation at the end of its job: the re-measured medians, the median of all its
    # runs, the relative noise band, and "unconfirmed" when the runs disagree beyond it
    confirm_times: Mapped[list[float] | None] = mapped_column(JSON)
    confirmed_ms: Mapped[float | None]
    noise_band: Mapped[float | None]
    flag: Mapped[str] = mapped_column(default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class BestConfig(Base):
    __tablename__ = "best_config"

    workload_id: Mapped[int] = mapped_column(ForeignKey("workload.id"), primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("device.id"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id"))
    time_ms: Mapped[float]
    config: Mapped[dict[str, Any]]
    fingerprint: Mapped[str] = mapped_column(default="", server_default="")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiToken(Base):
    """A bearer token of the REST service, stored as a salted SHA-256 digest of its secret.

    ``token_id`` is the public part of the token (it is printed inside the token itself) and
    selects the row; the secret is never stored.
    """

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_id: Mapped[str] = mapped_column(unique=True)
    name: Mapped[str]
    salt: Mapped[str]
    digest: Mapped[str]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]
