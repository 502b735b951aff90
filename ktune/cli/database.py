"""``ktune db``: the tuning-log database itself."""

from __future__ import annotations

import typer

from ktune.cli.common import DbOption, open_log, out

__all__ = ["app"]

app = typer.Typer(help="Manage the tuning-log database.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(db: DbOption = None) -> None:
    """Apply pending schema migrations."""
    from ktune.db import upgrade as upgrade_log

    out.print(f"tuning log at {upgrade_log(db)} is up to date")


@app.command("where")
def where(db: DbOption = None) -> None:
    """Print the tuning log's URL."""
    with open_log(db) as tlog:
        out.print(tlog.url)
