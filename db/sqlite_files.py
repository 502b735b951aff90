"""Opening a SQLite tuning log read-only, without SQLAlchemy (the engine and the reader share it).

Nothing is created: not the file, not its folder, not a journal-mode switch.
"""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from ktune.db.errors import DatabaseError

__all__ = ["SQLITE_BUSY_TIMEOUT_S", "connect_read_only", "existing_file"]

SQLITE_BUSY_TIMEOUT_S = 30


def existing_file(file: Path | None, masked: str) -> Path:
    """``file``, which must exist: a read-only open creates none. ``masked``: the URL for
    messages (``no such tuning log: URL ...``)."""
    if file is None:
        raise DatabaseError(f"no such tuning log: {masked} is in memory")
    try:
        mode = file.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise DatabaseError(
            f"no such tuning log: {masked} (a tuning job or an import creates it)"
        ) from None
    except OSError as exc:
        raise DatabaseError(f"cannot use {masked}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(mode):
        raise DatabaseError(f"no such tuning log: {masked} (not a file)")
    return file


def connect_read_only(file: Path) -> sqlite3.Connection:
    """A read-only connection to ``file``, readable even on a read-only filesystem.

    ``mode=ro`` locks as usual, so it sees what a live writer has committed. On a WAL log
    it needs the ``-shm`` file beside it, and where that cannot be made (a read-only
    folder or filesystem) SQLite refuses; then the file is opened ``immutable``: read
    without locks, which is safe as nothing can write the log there either.
    """
    uri = f"file:{quote(str(file.absolute()))}?mode=ro"
    conn = _connect(uri)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL index
    except sqlite3.OperationalError as exc:
        conn.close()
        if exc.sqlite_errorcode not in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY_DIRECTORY):
            raise
        return _connect(uri + "&immutable=1")
    except BaseException:
        conn.close()
        raise
    return conn


def _connect(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)
    conn.execute("PRAGMA query_only=ON")
    return conn
