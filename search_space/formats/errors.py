"""Errors shared by the importers of foreign formats."""

from __future__ import annotations

__all__ = ["FormatError"]


class FormatError(ValueError):
    """A file cannot be read as the format it claims; the message is one line naming the file
    and the problem. ``problem`` is the message without the file, for callers that must not
    show paths (the service: its clients name recordings, not files)."""

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem if problem is not None else message
