"""best_config follows the kernel's interface: recomputed from the trials.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24

Until now a stored best was replaced only by a faster trial, so after a kernel gained or
lost a knob the lookup kept answering with a config of the old interface. The rule is now
the one of ``db/best_rule.py``: over the ok trials of a (workload, device) in the order they
were recorded, a trial replaces the best when its parameter names differ from the best's,
else only when it is strictly faster. This migration replays that rule over every log's
trials and rewrites the best configs that it changes; a log whose kernels never changed
their interface keeps its rows as they are. The rule is copied here, not imported, so that
this migration stays what it was when the code moves on. No schema change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_trial = sa.table(
    "trial",
    sa.column("id", sa.Integer()),
    sa.column("workload_id", sa.Integer()),
    sa.column("device_id", sa.Integer()),
    sa.column("status", sa.String()),
    sa.column("time_ms", sa.Double()),
    sa.column("config", sa.JSON()),
)
_best = sa.table(
    "best_config",
    sa.column("workload_id", sa.Integer()),
    sa.column("device_id", sa.Integer()),
    sa.column("trial_id", sa.Integer()),
    sa.column("time_ms", sa.Double()),
    sa.column("config", sa.JSON()),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)

_Best = tuple[int, float, dict[str, Any]]  # trial id, time, config


def _replayed(conn: sa.Connection) -> dict[tuple[int, int], _Best]:
    """The best of every (workload, device) by the new rule, from its ok trials in id order."""
    query = (
        sa.select(
            _trial.c.id, _trial.c.workload_id, _trial.c.device_id, _trial.c.time_ms, _trial.c.config
        )
        .where(_trial.c.status == "ok", _trial.c.time_ms.is_not(None))
        .order_by(_trial.c.workload_id, _trial.c.device_id, _trial.c.id)
    )
    bests: dict[tuple[int, int], _Best] = {}
    for row in conn.execute(query, execution_options={"yield_per": 2000}):  # streamed
        pair = (row.workload_id, row.device_id)
        current = bests.get(pair)
        if current is None or set(row.config) != set(current[2]) or row.time_ms < current[1]:
            bests[pair] = (row.id, row.time_ms, row.config)
    return bests


def upgrade() -> None:
    conn = op.get_bind()
    columns = (_best.c.workload_id, _best.c.device_id, _best.c.trial_id)
    stored = {(w, d): trial_id for w, d, trial_id in conn.execute(sa.select(*columns))}
    now = datetime.now(UTC)
    if conn.dialect.name == "sqlite":
        now = now.replace(tzinfo=None)  # SQLite stores naive UTC (db.schema.UTCDateTime)
    for (workload_id, device_id), (trial_id, time_ms, config) in _replayed(conn).items():
        values = {"trial_id": trial_id, "time_ms": time_ms, "config": config, "updated_at": now}
        if (workload_id, device_id) not in stored:
            pair = {"workload_id": workload_id, "device_id": device_id}
            conn.execute(_best.insert().values(**pair, **values))
        elif stored[workload_id, device_id] != trial_id:
            conn.execute(
                _best.update()
                .where(_best.c.workload_id == workload_id, _best.c.device_id == device_id)
                .values(values)
            )


def downgrade() -> None:
    """Nothing to undo: the recomputed bests are valid under the old rule's schema."""
