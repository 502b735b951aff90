"""Alembic revisions of the tuning-log schema."""
