"""The REST service: job leases and cancellation, hashed API tokens, lookup by operator.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

- job.claimed_by / job.lease_until: the runner (server or ``ktune worker``) holding a job and
  until when; a running job whose lease has expired is claimed again and resumed.
- job.cancel_requested: set by ``POST /v1/jobs/{id}/cancel``; the runner stops within a batch.
- api_token: bearer tokens, stored as a salted SHA-256 digest of the secret.
- ix_workload_operator: the lookup's "nearest tuned shape" tier reads workloads by operator.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch_op:
        batch_op.add_column(sa.Column("claimed_by", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_index(op.f("ix_workload_operator"), "workload", ["operator"], unique=False)
    op.create_table(
        "api_token",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("salt", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("token_id", name=op.f("uq_api_token_token_id")),
    )


def downgrade() -> None:
    op.drop_table("api_token")
    op.drop_index(op.f("ix_workload_operator"), table_name="workload")
    with op.batch_alter_table("job") as batch_op:
        batch_op.drop_column("cancel_requested")
        batch_op.drop_column("lease_until")
        batch_op.drop_column("claimed_by")
