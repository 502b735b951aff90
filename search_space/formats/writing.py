"""What the writers of recorded measurements share: values checked against their parameter,
and files replaced atomically (a crash never leaves half a file)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from search_space.formats.reading import MISSING, canonical
from search_space.parameters import Value

__all__ = ["export_value", "replace_atomically"]


def export_value(config: Mapping[str, Any], name: str, table: Mapping[Value, Value]) -> Any:
    """``config[name]`` as the parameter's own value; ``ValueError`` when it has none such."""
    if name not in config:
        raise ValueError(f"config {dict(config)} lacks parameter {name!r}")
    value = config[name]
    canon = canonical(table, value.item() if hasattr(value, "item") else value)  # numpy scalars
    if canon is MISSING:
        raise ValueError(f"config {dict(config)}: {name}={value!r} is not among the values of {name}")
    return canon


def replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (mode 0644) through a temporary file renamed over it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
