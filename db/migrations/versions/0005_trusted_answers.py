"""Answers a build can trust: fingerprints, reused measurements, confirmed winners.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

- trial.fingerprint: a hash of the kernel template and toolchain facets of its toolchain
  (``ktune.db.fingerprints``); trials recorded before have none (unknown provenance).
- trial.reused_from: the earlier trial whose measurement a job reused instead of measuring.
- trial.confirm_times / confirmed_ms / noise_band / flag: a job's re-measurement of its top
  candidates before it ends.
- best_config.fingerprint: the fingerprint of the best trial, for the best rule.
- device.toolchain: the latest toolchain the device's fingerprinted trials ran under.
- job.warning: why its answer may not be trusted (a machine too noisy to tune on).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("trial") as batch_op:
        batch_op.add_column(
            sa.Column("fingerprint", sa.String(), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("reused_from", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("confirm_times", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("confirmed_ms", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("noise_band", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("flag", sa.String(), nullable=False, server_default=""))
    with op.batch_alter_table("best_config") as batch_op:
        batch_op.add_column(
            sa.Column("fingerprint", sa.String(), nullable=False, server_default="")
        )
    with op.batch_alter_table("device") as batch_op:
        batch_op.add_column(sa.Column("toolchain", sa.JSON(), nullable=True))
    with op.batch_alter_table("job") as batch_op:
        batch_op.add_column(sa.Column("warning", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch_op:
        batch_op.drop_column("warning")
    with op.batch_alter_table("device") as batch_op:
        batch_op.drop_column("toolchain")
    with op.batch_alter_table("best_config") as batch_op:
        batch_op.drop_column("fingerprint")
    with op.batch_alter_table("trial") as batch_op:
        for name in ("flag", "noise_band", "confirmed_ms", "confirm_times", "reused_from"):
            batch_op.drop_column(name)
        batch_op.drop_column("fingerprint")
