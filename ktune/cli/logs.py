"""Where the long-running commands (``ktune serve``, ``ktune worker``) send ktune's log.

The library modules only log (``logging.getLogger(__name__)``: requests, job starts and ends,
lost leases); the command that runs them decides where the lines go: stderr, one line each,
with a UTC timestamp.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

__all__ = ["log_to_stderr"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (not the stream it was at
    start: a test's captured stream goes away); a type of its own, to find it again."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current sys.stderr


def log_to_stderr(level: str) -> None:
    """Send the ``ktune`` loggers' records at ``level`` (a logging or uvicorn level name,
    e.g. ``info``; ``trace`` is ``debug``) and above to stderr. Calling it again replaces
    the handler, so lines are never written twice."""
    name = "DEBUG" if level.lower() == "trace" else level.upper()
    handler = _StderrHandler()
    formatter = logging.Formatter(_FORMAT, datefmt="%Y-%m-%dT%H:%M:%SZ")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    logger = logging.getLogger("ktune")
    for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(getattr(logging, name, logging.INFO))
