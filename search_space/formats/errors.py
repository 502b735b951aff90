"""Errors shared by the importers of foreign formats."""

from __future__ import annotations

__all__ = ["FormatError"]


class FormatError(ValueError):
    """A file cannot be read as the format it claims; the message is one line naming the file and the problem."""
