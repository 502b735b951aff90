"""Temporary work directories that name their process, and the sweep of dead ones.

A directory is ``<tmp>/ktune-<kind>-<pid>-<random>``. A process killed with ``kill -9`` cannot
remove its own; the next ktune process to make one (or a runner starting) removes every
directory whose process no longer exists.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = ["make_workdir", "sweep_workdirs"]

_NAME = re.compile(r"^ktune-[a-z]+-(\d+)-")


def make_workdir(kind: str) -> str:
    """A new directory ``ktune-<kind>-<this pid>-...`` in the temporary directory, after
    sweeping those of dead processes."""
    sweep_workdirs()
    return tempfile.mkdtemp(prefix=f"ktune-{kind}-{os.getpid()}-")


def sweep_workdirs(root: str | Path | None = None) -> list[Path]:
    """Remove the ktune work directories under ``root`` (default: the temporary directory)
    whose process is gone; the ones removed."""
    removed: list[Path] = []
    try:
        entries = list(Path(root or tempfile.gettempdir()).iterdir())
    except OSError:
        return removed
    for path in entries:
        match = _NAME.match(path.name)
        if match is None or _alive(int(match.group(1))) or not path.is_dir():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
