"""The recorded spaces the service may read: the bundled ones and one configured directory.

A client names a recording (``convolution_A4000``); it never gives a path. Names map to
files only through this catalog, so a request cannot make the server read any other file.
Loaded recordings are cached, for the whole process, by path, size and modification time.
Every method reports a file that cannot be used as a :class:`FormatError`.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from ktune.search_space.formats import FormatError, RecordedSpace, load_recording
from ktune.tuner.sources import bundled_recordings

__all__ = ["RecordingCatalog", "RecordingInfo", "UnknownRecording"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_SUFFIXES = (".json.gz", ".json")


class UnknownRecording(LookupError):
    """No recording of that name in the catalog."""


@dataclass(frozen=True)
class RecordingInfo:
    name: str
    path: Path
    bundled: bool


_cache_lock = threading.Lock()
_cache: dict[tuple[Path, int, int], RecordedSpace] = {}
_loading: dict[Path, threading.Lock] = {}  # a lock per path read, so each is parsed once


class RecordingCatalog:
    """Name -> recorded space, for the bundled recordings and ``directory`` (if any)."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory

    def entries(self) -> dict[str, RecordingInfo]:
        """Every recording by name; bundled names win over files of the directory."""
        found = {
            name: RecordingInfo(name, path.resolve(), True)
            for name, path in bundled_recordings().items()
        }
        if self._directory is not None:
            try:
                paths = sorted(self._directory.iterdir())
            except OSError as exc:  # removed or made unreadable since the server started
                log.warning("recordings directory %s cannot be listed: %s", self._directory, exc)
                paths = []
            for path in paths:
                name = _stem(path.name)
                if name is None or not path.is_file():
                    continue
                if name in found:
                    log.warning("recording %s is ignored: a bundled recording has its name", path)
                    continue
                found[name] = RecordingInfo(name, path.resolve(), False)
        return found

    def resolve(self, name: str) -> RecordingInfo:
        if not _NAME.match(name):
            raise UnknownRecording(f"{name!r} is not a recording name (see GET /v1/spaces)")
        info = self.entries().get(name)
        if info is None:
            raise UnknownRecording(f"no recorded space {name!r} (see GET /v1/spaces)")
        return info

    def load(self, name: str) -> RecordedSpace:
        """The recording ``name``; FormatError when its file cannot be read."""
        return self.read(self.resolve(name).path)

    def by_path(self, path: str | Path) -> tuple[str, RecordedSpace] | None:
        """Name and recording of the catalog file at ``path``, or None for any other file.

        Jobs store the path of their recording; only catalog files are read back from it.
        """
        try:
            wanted = Path(path).resolve()
        except (OSError, RuntimeError):
            return None
        name = next((n for n, info in self.entries().items() if info.path == wanted), None)
        if name is None:
            return None
        try:
            return name, self.read(wanted)
        except FormatError:
            return None

    def warm(self) -> None:
        """Read the bundled recordings into the cache (a server starts this on a thread): the
        first job of one then does not wait while it is parsed (a quarter of a second and
        more for ``convolution_A4000``)."""
        for info in self.entries().values():
            if info.bundled:
                try:
                    self.read(info.path)
                except FormatError as exc:  # a broken install: the job's request will say so
                    log.warning("bundled recording %s cannot be read: %s", info.path, exc)

    def read(self, path: Path) -> RecordedSpace:
        """The recording at ``path``, through the cache; FormatError when it cannot be read.

        For paths the service chose: a catalog entry's, or one a job stored (the jobs' source
        reader, so that a job's recording is parsed once, when it is submitted)."""
        try:
            stat = path.stat()
        except OSError as exc:
            problem = f"cannot read the file ({exc.strerror or type(exc).__name__})"
            raise FormatError(f"{path}: {problem}", problem) from None
        key = (path, stat.st_size, stat.st_mtime_ns)
        with _cache_lock:
            cached = _cache.get(key)
            loading = _loading.setdefault(path, threading.Lock())
        if cached is not None:
            return cached
        with loading:  # one parse of a file at a time: a second reader waits for the first's
            with _cache_lock:
                cached = _cache.get(key)
            if cached is not None:
                return cached
            recording = _read(path)  # outside the cache's lock: loading takes a while
            with _cache_lock:
                for old in [k for k in _cache if k[0] == path]:
                    del _cache[old]  # an older version of the same file
                _cache[key] = recording
        return recording


def _read(path: Path) -> RecordedSpace:
    """The recording at ``path``; :class:`FormatError` when it cannot be used.

    The reader reports every problem of a file as a :class:`FormatError`; anything else it
    raises is a bug of ours, logged with its traceback, but still a broken file to the client
    rather than a server error.
    """
    try:
        return load_recording(path)
    except FormatError:
        raise
    except (ValueError, ArithmeticError, RecursionError, MemoryError) as exc:
        log.exception("recording %s: unexpected error of the reader", path)
        problem = f"cannot be read ({type(exc).__name__})"
        raise FormatError(f"{path}: {problem}", problem) from None


def _stem(filename: str) -> str | None:
    for suffix in _SUFFIXES:
        if filename.endswith(suffix):
            name = filename[: -len(suffix)]
            return name if _NAME.match(name) else None
    return None
