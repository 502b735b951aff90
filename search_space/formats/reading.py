"""What the importers of recorded measurements share: reading a file, one-line errors, values.

A recording is read by content, not by name (a ``.json`` may be gzipped and a ``.gz`` may not),
and identified by the sha256 of its stored bytes. A recorded parameter value is taken as the
parameter's own value of the same type (:func:`canonical`), so configs read from any format
key and compare alike.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ktune.search_space.formats.errors import FormatError
from ktune.search_space.parameters import Parameter, Value

__all__ = [
    "MISSING",
    "canonical",
    "format_error",
    "is_number",
    "read_bytes",
    "shown",
    "value_tables",
]

_GZIP_MAGIC = b"\x1f\x8b"
#: what :func:`canonical` returns for a value the parameter does not have
MISSING: Any = object()


def format_error(path: Path, problem: str, kind: type[FormatError] = FormatError) -> FormatError:
    """A one-line :class:`FormatError` (or subclass ``kind``) naming ``path`` (``problem`` kept
    apart, without it)."""
    return kind(_one_line(f"{path}: {problem}"), _one_line(problem))


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def read_bytes(path: Path) -> tuple[bytes, str]:
    """The decompressed bytes of ``path`` and the sha256 hex digest of its stored ones."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise format_error(path, "no such file") from None
    except OSError as exc:
        raise format_error(path, f"cannot read the file ({exc.strerror or exc})") from None
    digest = hashlib.sha256(raw).hexdigest()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise format_error(path, f"truncated or corrupt gzip data ({exc})") from None
    return raw, digest


def value_tables(parameters: Sequence[Parameter]) -> list[dict[Value, Value]]:
    """Per parameter, a table from each value to itself (for :func:`canonical`)."""
    return [{v: v for v in p.values} for p in parameters]


def canonical(table: Mapping[Value, Value], value: Any) -> Any:
    """The parameter's own value equal to ``value`` and of its type, else :data:`MISSING`.

    ``True == 1 == 1.0`` in Python; only an int may stand for a float, since the key
    Kernel Tuner builds with ``str`` differs for the others.
    """
    try:
        found = table.get(value, MISSING)
    except TypeError:  # unhashable: a list or an object
        return MISSING
    if found is MISSING or type(found) is type(value):
        return found
    return found if type(found) is float and type(value) is int else MISSING


def is_number(x: Any) -> bool:
    """An int or a float, not a bool (JSON's true is not a number of milliseconds)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)``, shortened to about ``limit`` characters (an int may have thousands)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
