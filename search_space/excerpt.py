"""Short quotes of user input in error messages.

An error names what was wrong by quoting it, and what was wrong may be megabytes on one line (a
shape, a constraint, a T1 ``Values`` string, an option). :func:`excerpt` is how every message
quotes input: ``repr`` of at most :data:`MAX_EXCERPT` characters, cut with an ellipsis and the
full length. :func:`bounded` is the last guard where messages leave ktune (a CLI error line, a
REST error body), for text quoted by code that cannot import this module (the database layer)
or by a library.
"""

from __future__ import annotations

__all__ = ["MAX_EXCERPT", "MAX_MESSAGE", "bounded", "excerpt"]

#: the most characters of the input a message quotes
MAX_EXCERPT = 200
#: the most characters of one error message
MAX_MESSAGE = 1000


def excerpt(value: object, limit: int = MAX_EXCERPT) -> str:
    """``repr(value)`` when it is at most ``limit`` characters; else its first ``limit``
    characters, ``...`` and how long it was: ``'aaaa'... (3,000,000 characters)``. A string's
    prefix is cut before ``repr``, so a huge input is never copied whole."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` when it is at most ``limit`` characters, else its start and its end joined
    by `` ... `` (the end often says what to do: the choices, the limit)."""
    if len(message) <= limit:
        return message
    tail = limit // 4
    head = limit - tail
    cut = len(message) - head - tail
    return f"{message[:head]} ...[{cut:,} characters]... {message[-tail:]}"
