"""Options and error handling shared by every ``ktune`` command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console

from db import TuningLog

__all__ = ["DbOption", "CliError", "open_log", "out", "err"]



def _console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 200  # pipes and files: don't squeeze tables into 80 columns
    return console


out = _console()
err = _console(stderr=True)

DbOption = Annotated[
    Optional[str],
    typer.Option("--db", help="Tuning-log URL (default: $KTUNE_DATABASE_URL, else a SQLite file in the user data dir)."),
]


class CliError(Exception):
    """A one-line message for the user; the command exits with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def open_log(url: str | None) -> TuningLog:
    return TuningLog.open(url)
