"""A recording of a brute-forced space, read by its content: a Kernel Tuner cache or KTT output.

What replays, imports and uploads accept (T4 results are not here: they name neither their space
nor their GPU, so they are read with a T1 spec and a device name, ``load_t4``).
"""

from __future__ import annotations

from pathlib import Path

from ktune.search_space.formats.errors import FormatError
from ktune.search_space.formats.kernel_tuner import RecordedSpace, load_cache
from ktune.search_space.formats.reading import TooLarge

__all__ = ["load_recording"]


def load_recording(path: str | Path, max_bytes: int | None = None) -> RecordedSpace:
    """The Kernel Tuner cache or KTT output at ``path`` (at most ``max_bytes`` stored or
    inflated: see ``reading.read_bytes``); a file that is neither is the cache reader's
    :class:`FormatError`."""
    path = Path(path)
    try:
        return load_cache(path, max_bytes)
    except TooLarge:
        raise  # too large for either reader: not read again
    except FormatError as not_a_cache:
        from ktune.search_space.formats import ktt

        try:
            return ktt.load_ktt(path, max_bytes=max_bytes)
        except ktt.NotKttError:
            raise not_a_cache from None
