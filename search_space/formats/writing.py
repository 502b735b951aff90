"""What the writers of recorded measurements share: values checked against their parameter,
and files replaced atomically (a crash never leaves half a file)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ktune.search_space.formats.reading import MISSING, canonical, value_tables
from ktune.search_space.parameters import Parameter, Value

__all__ = ["export_value", "first_by_config", "replace_atomically"]


class _HasConfig(Protocol):
    @property
    def config(self) -> Mapping[str, Any]: ...


R = TypeVar("R", bound=_HasConfig)


def first_by_config(
    parameters: Sequence[Parameter], records: Iterable[R]
) -> dict[str, tuple[dict[str, Any], R]]:
    """Each record with its config in the parameters' own values, keyed as Kernel Tuner keys a
    config (its values joined by commas); when a config comes twice, the first record wins."""
    tables = value_tables(parameters)
    out: dict[str, tuple[dict[str, Any], R]] = {}
    for record in records:
        values = [export_value(record.config, p.name, t) for p, t in zip(parameters, tables)]
        key = ",".join(map(str, values))
        if key not in out:
            out[key] = (dict(zip((p.name for p in parameters), values)), record)
    return out


def export_value(config: Mapping[str, Any], name: str, table: Mapping[Value, Value]) -> Any:
    """``config[name]`` as the parameter's own value; ``ValueError`` when it has none such."""
    if name not in config:
        raise ValueError(f"config {dict(config)} lacks parameter {name!r}")
    value = config[name]
    canon = canonical(table, value.item() if hasattr(value, "item") else value)  # numpy scalars
    if canon is MISSING:
        raise ValueError(
            f"config {dict(config)}: {name}={value!r} is not among the values of {name}"
        )
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
