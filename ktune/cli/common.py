"""Options and error handling shared by every ``ktune`` command.

``out`` and ``err`` (rich consoles for stdout and stderr) and ``DbOption`` (Typer's ``--db``)
are made when first imported or used, so that ``ktune best``, an argparse command that
prints plain text, loads neither rich nor Typer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from ktune.db.urls import ENV_VAR, parse_plain

if TYPE_CHECKING:
    from rich.console import Console

    from ktune.db.repository import TuningLog

    out: Console
    err: Console
    #: ``--db`` of a Typer command (``db: DbOption = None``)
    DbOption = Annotated[str | None, "--db"]

__all__ = [
    "DB_HELP",
    "MAX_LIMIT",
    "CliError",
    "DbOption",
    "check_output",
    "check_range",
    "err",
    "open_log",
    "out",
    "persistent_log",
]

# The other bounds of numeric options are shared with the REST API: tuner.bounds.
MAX_LIMIT = 2**63 - 1  # SQL LIMIT takes a 64-bit integer


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 200  # pipes and files: don't squeeze tables into 80 columns
    return console


def _db_option() -> Any:
    import typer

    return Annotated[str | None, typer.Option("--db", help=DB_HELP, callback=persistent_log)]


def __getattr__(name: str) -> Any:
    if name in ("out", "err"):
        value = _console(stderr=name == "err")
    elif name == "DbOption":
        value = _db_option()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


class CliError(Exception):
    """A one-line message for the user; the command exits with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def persistent_log(value: str | None) -> str | None:
    """Refuse a ``--db`` (else ``$KTUNE_DATABASE_URL``) that cannot keep a tuning log."""
    if value is not None and not value.strip():
        raise CliError(
            "--db is empty: give a database URL (e.g. sqlite:///path/to/ktune.db) or leave --db out"
        )
    given, url = ("--db", value) if value is not None else (ENV_VAR, os.environ.get(ENV_VAR))
    if url and _in_memory(url):
        raise CliError(
            f"{given} {url} is an in-memory database, lost at exit: give a file, e.g. sqlite:///path/to/ktune.db"
        )
    return value


def _in_memory(url: str) -> bool:
    plain = parse_plain(url)
    if plain is not None:
        return plain.backend == "sqlite" and plain.database is None
    from ktune.db.engine import in_memory

    return in_memory(url)


DB_HELP = (
    "Tuning-log URL (default: $KTUNE_DATABASE_URL, "
    "else a SQLite file in the user data dir); not in memory."
)


def check_range(
    option: str, value: float | None, low: float, high: float, *, low_open: bool = False
) -> None:
    """Raise :class:`CliError` naming ``option`` and the range unless ``value`` is in it
    (``low < value`` when ``low_open``); ``None`` (not given) passes, NaN does not."""
    if value is None or ((value > low if low_open else value >= low) and value <= high):
        return
    bounds = f"> {low} and <= {high}" if low_open else f"{low}..{high}"
    raise CliError(f"{option} must be {bounds}, got {value}")


def check_output(option: str, path: Path) -> Path:
    """``path`` (``~`` expanded) once a file can be written there, before any work is done:
    not a directory, in a directory that exists or is created now (as ``mkdir -p``) and is
    writable. Anything else is a :class:`CliError` naming ``option``."""
    path = path.expanduser()
    parent = path.parent
    if path.is_dir():
        raise CliError(f"{option} {path}: is a directory")
    if parent.exists() and not parent.is_dir():
        raise CliError(f"{option} {path}: {parent} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(
            f"{option} {path}: cannot create directory {parent}: {exc.strerror or exc}"
        ) from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CliError(f"{option} {path}: directory {parent} is not writable")
    return path


def open_log(url: str | None, *, read_only: bool = False) -> TuningLog:
    """The tuning log at ``url`` (default log when None); ``read_only`` for commands that
    only read it, so they work on a read-only mount and never create or migrate a log."""
    from ktune.db.repository import TuningLog

    return TuningLog.open(url, read_only=read_only)
