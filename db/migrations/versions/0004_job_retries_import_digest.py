"""Runners retry infrastructure failures; a recording is imported once.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28

- job.retries: how often runners put the job back in the queue after a failure of the
  infrastructure (its database, its host) rather than of its kernels; they stop at a limit.
- job.import_digest (unique): the content hash of an imported recording. An import is one
  transaction that inserts its job with this hash, so concurrent identical uploads write one
  job and an import killed midway leaves nothing behind. Finished imports of older versions
  get their digest from their options (the first one per digest, should there be several).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_job = sa.table(
    "job",
    sa.column("id", sa.Integer()),
    sa.column("backend", sa.String()),
    sa.column("state", sa.String()),
    sa.column("options", sa.JSON()),
    sa.column("import_digest", sa.String()),
)


def upgrade() -> None:
    with op.batch_alter_table("job") as batch_op:
        batch_op.add_column(
            sa.Column("retries", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch_op.add_column(sa.Column("import_digest", sa.String(), nullable=True))
        batch_op.create_unique_constraint(op.f("uq_job_import_digest"), ["import_digest"])
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_job.c.id, _job.c.options)
        .where(_job.c.backend == "import", _job.c.state == "done")
        .order_by(_job.c.id)
    ).all()
    seen: set[str] = set()
    for row in rows:
        digest = (row.options or {}).get("digest")
        if isinstance(digest, str) and digest not in seen:
            seen.add(digest)
            conn.execute(sa.update(_job).where(_job.c.id == row.id).values(import_digest=digest))


def downgrade() -> None:
    with op.batch_alter_table("job") as batch_op:
        batch_op.drop_constraint(op.f("uq_job_import_digest"), type_="unique")
        batch_op.drop_column("import_digest")
        batch_op.drop_column("retries")
