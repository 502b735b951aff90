"""Bearer tokens: who may write (and, by setting, read).

A token is accepted when it equals one of ``KTUNE_API_TOKENS`` (compared in constant time,
against every configured token) or proves a live token stored hashed in the log
(``ktune token create``). Tokens are read from the ``Authorization`` header only, never
from the URL, and are never logged nor sent back.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from ktune.db import TuningLog
from ktune.server.settings import Settings

__all__ = ["Principal", "authenticate"]


@dataclass(frozen=True)
class Principal:
    """Who a token belongs to, as safe to show: never the token itself."""

    name: str


def authenticate(token: str, settings: Settings, tlog: TuningLog) -> Principal | None:
    """The holder of ``token``, or None when it is not a valid token."""
    if not token:
        return None
    given = token.encode()
    matched = None
    for i, configured in enumerate(settings.token_values()):
        # Compare with every configured token, so timing does not tell which one nearly matched.
        if hmac.compare_digest(given, configured.encode()) and matched is None:
            matched = Principal(f"configured token #{i + 1}")
    if matched is not None:
        return matched
    stored = tlog.verify_token(token)
    return None if stored is None else Principal(f"token {stored.name!r} ({stored.token_id})")
