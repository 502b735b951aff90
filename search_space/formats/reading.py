"""What the importers of recorded measurements share: reading a file, one-line errors, values.

A recording is read by content, not by name (a ``.json`` may be gzipped and a ``.gz`` may not),
and identified by the sha256 of its stored bytes. A recorded parameter value is taken as the
parameter's own value of the same type (:func:`canonical`), so configs read from any format
key and compare alike.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ktune.search_space.formats.errors import FormatError
from ktune.search_space.parameters import Parameter, Value

__all__ = [
    "DEFAULT_MAX_INFLATED_BYTES",
    "MISSING",
    "TooLarge",
    "canonical",
    "format_error",
    "inflate",
    "inflation_limit",
    "is_number",
    "read_bytes",
    "read_stored",
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


#: largest decompressed (or plain) recording or spec read, unless ``KTUNE_MAX_INFLATED_BYTES``
#: or the caller says otherwise: a gzip bomb of 1 MB inflates to GBs.
DEFAULT_MAX_INFLATED_BYTES = 256 * 1024 * 1024
_LIMIT_VARIABLE = "KTUNE_MAX_INFLATED_BYTES"
_CHUNK = 1024 * 1024


class TooLarge(FormatError):
    """A file, or what it inflates to, exceeds the size limit; nothing beyond it was read."""


def inflation_limit() -> int:
    """The size limit in bytes: ``KTUNE_MAX_INFLATED_BYTES`` when set to a positive integer,
    else :data:`DEFAULT_MAX_INFLATED_BYTES`."""
    text = os.environ.get(_LIMIT_VARIABLE, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return DEFAULT_MAX_INFLATED_BYTES


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.3g} MiB"


def read_stored(path: Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (default
    :func:`inflation_limit`). A FIFO, a device (``/dev/zero``) or a directory is refused at
    once, never read: reading one would hang or never end."""
    limit = inflation_limit() if max_bytes is None else max_bytes
    try:
        info = path.stat()
    except FileNotFoundError:
        raise format_error(path, "no such file") from None
    except OSError as exc:
        raise format_error(path, f"cannot read the file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise format_error(path, "not a regular file (a directory, device or pipe)")
    if info.st_size > limit:
        raise format_error(path, f"larger than the limit of {_mib(limit)}", TooLarge)
    try:
        with path.open("rb") as f:
            # read(n) allocates n bytes at once: ask for the size stat gave, then the rest
            want = min(limit, info.st_size) + 1
            raw = f.read(want)
            if len(raw) == want and want <= limit:  # it grew since stat (or /proc says 0)
                raw += f.read(limit + 1 - want)
    except OSError as exc:
        raise format_error(path, f"cannot read the file ({exc.strerror or exc})") from None
    if len(raw) > limit:  # it grew since stat
        raise format_error(path, f"larger than the limit of {_mib(limit)}", TooLarge)
    return raw


def inflate(path: Path, raw: bytes, max_bytes: int) -> bytes:
    """``raw`` gunzipped (every member, as ``gzip.decompress``), never more than
    ``max_bytes``: a :class:`TooLarge` error as soon as the output would exceed it."""
    out: list[bytes] = []
    size = 0
    data = raw
    while data:
        decoder = zlib.decompressobj(wbits=31)  # one gzip member
        pending = data
        try:
            while pending and not decoder.eof:
                chunk = decoder.decompress(pending, min(_CHUNK, max_bytes - size + 1))
                size += len(chunk)
                if size > max_bytes:
                    raise format_error(
                        path, f"inflates to more than the limit of {_mib(max_bytes)}", TooLarge
                    )
                out.append(chunk)
                pending = decoder.unconsumed_tail
        except zlib.error as exc:
            raise format_error(path, f"truncated or corrupt gzip data ({exc})") from None
        if not decoder.eof:
            raise format_error(path, "truncated or corrupt gzip data (it ends early)")
        data = decoder.unused_data.lstrip(b"\x00")  # members may be padded with zeros
        if data and data[:2] != _GZIP_MAGIC:
            raise format_error(path, "truncated or corrupt gzip data (trailing garbage)")
    return b"".join(out)


def read_bytes(path: Path, max_bytes: int | None = None) -> tuple[bytes, str]:
    """The decompressed bytes of ``path`` and the sha256 hex digest of its stored ones.

    Neither the stored nor the decompressed bytes may exceed ``max_bytes`` (default:
    :func:`inflation_limit`): past it, a :class:`TooLarge` error, read no further."""
    limit = inflation_limit() if max_bytes is None else max_bytes
    raw = read_stored(path, limit)
    digest = hashlib.sha256(raw).hexdigest()
    if raw[:2] == _GZIP_MAGIC:
        raw = inflate(path, raw, limit)
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
