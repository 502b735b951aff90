"""The ``ktune`` command line. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from ktune.cli import catalog, interchange, log_commands, tokens
from ktune.cli.common import CliError, DbOption, err, open_log, out
from ktune.cli.serve import serve
from ktune.cli.tune import tune
from ktune.cli.worker import worker
from ktune.db import DatabaseError, upgrade
from ktune.db.engine import DatabaseInputError
from ktune.tuner.measure.base import BackendError

#: the exit code when the tuning log cannot be reached or read (a build script can tell it
#: from 1, "nothing tuned answers that")
EXIT_LOG_UNAVAILABLE = 4

__all__ = ["app", "main"]

app = typer.Typer(
    name="ktune",
    help="ktune: autotuning of GPU kernel schedules, with a tuning log read at build time.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(tune)
app.command("import")(interchange.import_)
app.command()(interchange.export)
app.command()(log_commands.jobs)
app.command()(log_commands.trials)
app.command()(log_commands.best)
app.command()(log_commands.devices)
app.command()(catalog.strategies)
app.command()(catalog.operators)
app.command()(catalog.spaces)
app.command()(serve)
app.command()(worker)
app.add_typer(tokens.app, name="token")

db_app = typer.Typer(help="Manage the tuning-log database.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(db: DbOption = None) -> None:
    """Apply pending schema migrations."""
    url = upgrade(db)
    out.print(f"tuning log at {url} is up to date")


@db_app.command("where")
def db_where(db: DbOption = None) -> None:
    """Print the tuning log's URL."""
    with open_log(db) as tlog:
        out.print(tlog.url)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        app(args=list(argv) if argv is not None else None, standalone_mode=False)
    except CliError as exc:
        err.print(f"error: {exc}", markup=False)
        return exc.code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err.print("aborted", markup=False)
        return 130
    except typer.TyperException as exc:  # usage errors: unknown option, bad value, ...
        message = exc.format_message()
        if not message:  # no arguments: the help was printed
            return 0
        err.print(f"error: {message}", markup=False)
        return exc.exit_code
    except (ValueError, DatabaseError, BackendError) as exc:
        # Every input error of ours derives from ValueError and carries a one-line message.
        if os.environ.get("KTUNE_DEBUG"):
            raise
        err.print(f"error: {exc}", markup=False)
        if isinstance(exc, DatabaseInputError) or not isinstance(
            exc, (DatabaseError, BackendError)
        ):
            return 2
        return EXIT_LOG_UNAVAILABLE if isinstance(exc, DatabaseError) else 1
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
