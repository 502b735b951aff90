"""Readers and writers of foreign formats: Kernel Tuner cache files, T1 specs, T4 results and
KTT output (read only).

The T1, T4 and KTT readers are imported on first use, so that this package imports without them.
"""

from __future__ import annotations

from typing import Any

from ktune.search_space.formats.errors import FormatError
from ktune.search_space.formats.kernel_tuner import (
    Record,
    RecordedSpace,
    load_cache,
    write_cache,
    write_recording,
)
from ktune.search_space.formats.reading import TooLarge
from ktune.search_space.formats.recording import load_recording

__all__ = [
    "FormatError",
    "Record",
    "RecordedSpace",
    "T1Spec",
    "TooLarge",
    "load_cache",
    "load_ktt",
    "load_recording",
    "load_t1",
    "load_t4",
    "write_cache",
    "write_recording",
]

_LAZY = {
    "load_t1": "ktune.search_space.formats.t1",
    "T1Spec": "ktune.search_space.formats.t1",
    "load_t4": "ktune.search_space.formats.t4",
    "load_ktt": "ktune.search_space.formats.ktt",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
