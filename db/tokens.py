"""API tokens of the REST service, stored hashed.

A token reads ``ktune_<token id>_<secret>``. The token id is public (it names the row, and
``ktune token list`` shows it); the secret is 256 random bits and only its salted SHA-256
digest is stored, compared in constant time. A plain hash suits secrets this random; slow
password hashes exist for guessable passwords.

A token's name says what it is for: 1 to 64 printable characters (no newline or other control
character), never shaped like a token id, which it could be mistaken for. Names need not be
unique.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime

from sqlalchemy import Connection, select, update

from ktune.db.queries import to_token, token_t
from ktune.db.records import TokenRecord

__all__ = [
    "MAX_NAME_LENGTH",
    "PREFIX",
    "check_name",
    "create",
    "digest",
    "list_all",
    "revoke",
    "verify",
]

PREFIX = "ktune"
MAX_NAME_LENGTH = 64
_TOKEN = re.compile(rf"^{PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{20,128}})$")
_TOKEN_ID = re.compile(r"^[0-9a-f]{12}$")


def digest(salt: str, secret: str) -> str:
    return hashlib.sha256(f"{salt}:{secret}".encode()).hexdigest()


def check_name(name: str) -> str:
    """``name`` if it may name a token, else ValueError saying why (without echoing it)."""
    if not 1 <= len(name) <= MAX_NAME_LENGTH:
        raise ValueError(f"a token name is 1 to {MAX_NAME_LENGTH} characters, got {len(name)}")
    if not name.isprintable():
        raise ValueError("a token name cannot contain a newline or another control character")
    if _TOKEN_ID.match(name):
        raise ValueError("a token name cannot look like a token id (12 hex digits)")
    return name


def create(conn: Connection, name: str, now: datetime) -> tuple[TokenRecord, str]:
    """A new token named ``name`` (see :func:`check_name`): its record and the token itself
    (shown once, never stored)."""
    check_name(name)
    token_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_hex(16)
    row = conn.execute(
        token_t.insert()
        .values(
            token_id=token_id, name=name, salt=salt, digest=digest(salt, secret), created_at=now
        )
        .returning(token_t)
    ).one()
    return to_token(row), f"{PREFIX}_{token_id}_{secret}"


def verify(conn: Connection, token: str) -> TokenRecord | None:
    """The live token record that ``token`` proves, or None."""
    match = _TOKEN.match(token)
    if match is None:
        return None
    token_id, secret = match.groups()
    row = conn.execute(
        select(token_t).where(token_t.c.token_id == token_id, token_t.c.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    if not hmac.compare_digest(digest(row.salt, secret), row.digest):
        return None
    return to_token(row)


def list_all(conn: Connection) -> list[TokenRecord]:
    return [to_token(r) for r in conn.execute(select(token_t).order_by(token_t.c.id))]


def revoke(conn: Connection, token_id_or_name: str, now: datetime) -> int:
    """Revoke live tokens whose id or name is ``token_id_or_name``; how many were revoked."""
    stmt = (
        update(token_t)
        .where(
            (token_t.c.token_id == token_id_or_name) | (token_t.c.name == token_id_or_name),
            token_t.c.revoked_at.is_(None),
        )
        .values(revoked_at=now)
    )
    return int(conn.execute(stmt).rowcount)
