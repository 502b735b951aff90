"""Database URLs of the common forms, read without SQLAlchemy (for the read-only reader).

:func:`parse_plain` understands the URLs that SQLAlchemy's parser reads and writes back
unchanged: ``sqlite://`` (in memory), ``sqlite:///PATH`` with a path of letters, digits and
``+-./_~`` or spaces, and ``postgresql://[USER[:PASSWORD]@][HOST][:PORT]/DBNAME[?K=V&...]``
(``postgres://`` and ``postgresql+psycopg://`` alike) with plain names. For those its
``text`` and ``masked`` are exactly what ``ktune.db.resolve_url`` and
``ktune.db.engine.mask_url`` give, so messages read the same whichever path opened the log.
Any other URL gives None: the caller hands it to the SQLAlchemy path (``ktune.db.engine``),
which reads every form.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, quote_plus

__all__ = ["CONNECT_TIMEOUT_S", "ENV_VAR", "PlainUrl", "default_plain", "parse_plain", "raw_url"]

ENV_VAR = "KTUNE_DATABASE_URL"
CONNECT_TIMEOUT_S = 5

_SQLITE = re.compile(r"sqlite://(?:/(?P<path>[A-Za-z0-9+\-./_~ ]+))?")
_NAME = r"[A-Za-z0-9_.~\-]+"
#: compiled on first use (re's cache): most URLs are SQLite's
_POSTGRESQL = (
    rf"(?:postgresql|postgres|postgresql\+psycopg)://"
    rf"(?:(?P<user>{_NAME})(?::(?P<password>{_NAME}))?@)?"
    rf"(?P<host>[A-Za-z0-9.\-]+)?(?::(?P<port>[0-9]{{1,5}}))?"
    rf"/(?P<dbname>{_NAME})(?:\?(?P<query>[^#]+))?"
)


class PlainUrl(NamedTuple):
    """A URL of a form :func:`parse_plain` reads. ``database``: a SQLite file's path (None in
    memory); ``connect``: the keyword arguments of ``psycopg.connect`` (PostgreSQL)."""

    backend: str  # "sqlite" or "postgresql"
    text: str  # as db.resolve_url writes it (password kept)
    masked: str  # as db.engine.mask_url writes it
    database: str | None
    connect: Mapping[str, Any]


def raw_url(url: str | None) -> str | None:
    """``url``, else ``$KTUNE_DATABASE_URL``; None when neither is set (the default log)."""
    return url or os.environ.get(ENV_VAR) or None


def parse_plain(url: str) -> PlainUrl | None:
    """``url`` if it has one of the plain forms of this module, else None."""
    sqlite = _SQLITE.fullmatch(url)
    if sqlite is not None:
        return PlainUrl("sqlite", url, url, sqlite["path"], {})
    pg = re.fullmatch(_POSTGRESQL, url)
    if pg is None:
        return None
    query: dict[str, list[str]] = {}
    try:
        for key, value in parse_qsl(pg["query"] or "", keep_blank_values=True, strict_parsing=True):
            query.setdefault(key, []).append(value)
    except ValueError:
        return None
    if any(len(values) > 1 for values in query.values()):
        return None  # a key given twice: SQLAlchemy's reading of it is its own
    head = "postgresql+psycopg://"
    if pg["user"] is not None:
        head += pg["user"]
    tail = (pg["host"] or "") + (f":{int(pg['port'])}" if pg["port"] else "") + f"/{pg['dbname']}"
    if query:
        tail += "?" + "&".join(f"{quote_plus(k)}={quote_plus(query[k][0])}" for k in sorted(query))

    def render(password: str | None) -> str:
        if pg["user"] is None:
            return head + tail
        return head + ("" if password is None else f":{password}") + "@" + tail

    connect: dict[str, Any] = {
        name: value
        for name, value in (
            ("host", pg["host"]),
            ("port", int(pg["port"]) if pg["port"] else None),
            ("user", pg["user"]),
            ("password", pg["password"]),
            ("dbname", pg["dbname"]),
        )
        if value is not None
    }
    connect.update({key: values[0] for key, values in query.items()})
    connect.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
    masked = render(None if pg["password"] is None else "***")
    return PlainUrl("postgresql", render(pg["password"]), masked, None, connect)


def default_plain() -> PlainUrl | None:
    """The default log (``ktune.db`` in the user's data directory), if its path is plain;
    nothing is created."""
    from pathlib import Path

    import platformdirs

    return parse_plain(f"sqlite:///{Path(platformdirs.user_data_dir('ktune')) / 'ktune.db'}")
