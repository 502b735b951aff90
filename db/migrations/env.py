"""Alembic environment of the tuning log.

ktune runs migrations itself (``ktune.db.migrate``), handing over an open connection in
``config.attributes["connection"]``; there is no alembic.ini. Run through the ``alembic``
command instead, the URL comes from ``sqlalchemy.url`` or :func:`ktune.db.engine.resolve_url`.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from ktune.db.engine import make_engine, resolve_url
from ktune.db.schema import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None:  # the alembic command with db/alembic.ini
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=resolve_url(config.get_main_option("sqlalchemy.url")),
        target_metadata=target_metadata,
        render_as_batch=True,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(resolve_url(config.get_main_option("sqlalchemy.url")))
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
