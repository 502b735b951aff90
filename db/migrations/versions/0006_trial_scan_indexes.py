"""A new job's start-up does not grow with the log: indexes for its two reads of it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

- trial (workload_id, device_id, id) replaces trial (workload_id, device_id): the prior reads
  each chosen group's newest trials in id order, and counts a workload's trials by device,
  from the index alone.
- trial (workload_id, device_id, config_key): a job asks the log for the configs it is about
  to measure (the log as a measurement cache), a batch at a time, instead of loading every
  reusable trial when it starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index(op.f("ix_trial_workload_id_device_id"), table_name="trial")
    op.create_index(
        op.f("ix_trial_workload_id_device_id_id"), "trial", ["workload_id", "device_id", "id"]
    )
    op.create_index(
        op.f("ix_trial_workload_id_device_id_config_key"),
        "trial",
        ["workload_id", "device_id", "config_key"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_trial_workload_id_device_id_config_key"), table_name="trial")
    op.drop_index(op.f("ix_trial_workload_id_device_id_id"), table_name="trial")
    op.create_index(op.f("ix_trial_workload_id_device_id"), "trial", ["workload_id", "device_id"])
