"""``--shapes`` and ``--shapes-from`` of ``ktune tune``: the shapes of a set of jobs."""

from __future__ import annotations

from pathlib import Path

from ktune.cli.common import CliError
from ktune.search_space.workload import WorkloadError, parse_shape

__all__ = ["MAX_SHAPES", "shape_list"]

#: shapes one command may tune
MAX_SHAPES = 1000
#: the largest --shapes-from file read
MAX_FILE_BYTES = 1 << 20


def shape_list(
    shape: str | None, shapes: str | None, shapes_from: Path | None, op: str | None
) -> list[str] | None:
    """The shapes of ``--shapes`` or ``--shapes-from`` (None when neither is given), each
    checked by the shape grammar, duplicates dropped, in order; a :class:`CliError` naming
    the bad shape (and its line) otherwise."""
    if shapes is None and shapes_from is None:
        return None
    if shapes is not None and shapes_from is not None:
        raise CliError("give --shapes or --shapes-from, not both")
    if shape is not None:
        raise CliError("give --shape for one shape, or --shapes/--shapes-from for several")
    if op is None:
        raise CliError("--shapes and --shapes-from go with --op OPERATOR")
    if shapes is not None:
        items = [(f"--shapes item {n}", s.strip()) for n, s in enumerate(shapes.split(","), 1)]
    else:
        assert shapes_from is not None
        items = [(f"{shapes_from.name} line {n}", s) for n, s in _lines(shapes_from)]
    found: dict[tuple[int, ...], str] = {}
    for where, text in items:
        if not text:
            raise CliError(f"{where} is empty")
        try:
            found.setdefault(parse_shape(text), text)
        except WorkloadError as exc:
            raise CliError(f"{where}: {exc}") from None
    if not found:
        raise CliError(f"{shapes_from} holds no shape")
    if len(found) > MAX_SHAPES:
        raise CliError(f"at most {MAX_SHAPES} shapes at once, got {len(found)}")
    return list(found.values())


def _lines(path: Path) -> list[tuple[int, str]]:
    """Numbered non-blank lines of ``path`` without ``#`` comments."""
    path = path.expanduser()
    try:
        if not path.is_file():
            raise CliError(f"--shapes-from {path}: not a regular file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CliError(f"--shapes-from {path}: larger than {MAX_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--shapes-from {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"--shapes-from {path}: not UTF-8 text") from None
    numbered = ((n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), 1))
    return [(n, line) for n, line in numbered if line]
