"""Recorded spaces by name: the ones bundled with ktune, or a file path.

A replay job names its recording by path; a user may name a bundled one by its short name
(``convolution_A4000``). Reading a recording is the caller's choice of
:data:`RecordingReader` (the service reads through its cache), so each is parsed once per job.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ktune.search_space import recorded
from ktune.search_space.excerpt import excerpt
from ktune.search_space.formats import FormatError, RecordedSpace

__all__ = ["BUNDLED", "RecordingReader", "bundled_recordings", "resolve_recording"]

BUNDLED = Path(recorded.__file__).resolve().parent

#: reads the recording at a path (``load_recording``, or a cache in front of it); every problem
#: of the file is a :class:`~ktune.search_space.formats.FormatError`
RecordingReader = Callable[[Path], RecordedSpace]


def bundled_recordings() -> dict[str, Path]:
    """Recorded spaces shipped with ktune, by short name (``convolution_A4000``)."""
    return {p.name.split(".")[0]: p for p in sorted(BUNDLED.glob("*.json.gz"))}


def resolve_recording(name_or_path: str | Path) -> Path:
    """A path to a recording: an existing file, or the short name of a bundled one."""
    path = Path(name_or_path).expanduser()
    try:
        if path.exists():
            return path.resolve()
    except OSError:  # a name longer than the file system takes: no such file
        pass
    bundled = bundled_recordings().get(str(name_or_path))
    if bundled is not None:
        return bundled
    raise FormatError(
        f"{excerpt(str(name_or_path))}: no such file "
        f"(nor a bundled recording: {', '.join(bundled_recordings())})"
    )
