"""Hostile files given to the readers and the CLI: a gzip bomb stops at the size limit, a
FIFO or a device is refused at once, each as one error line; the limit never reads further."""

from __future__ import annotations

import gzip
import os
import threading
import tracemalloc
import zlib
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.search_space.formats import FormatError, TooLarge, load_cache, load_t1
from ktune.search_space.formats.reading import read_bytes
from ktune.tuner.sources import bundled_recordings

CONV = bundled_recordings()["convolution_A4000"]


def bomb(path: Path, inflated: int) -> Path:
    """A gzip file of ``inflated`` zero bytes (about a thousandth of that, stored)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    with path.open("wb") as f:
        for _ in range(inflated >> 20):
            f.write(compressor.compress(chunk))
        f.write(compressor.flush())
    return path


def test_a_gzip_bomb_stops_at_the_limit_without_inflating_it(tmp_path: Path) -> None:
    path = bomb(tmp_path / "bomb.json.gz", 1 << 30)  # 1 GiB of zeros in about 1 MB
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match="inflates to more than the limit of 8 MiB"):
            read_bytes(path, 8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak


def test_recordings_under_the_limit_read_as_before(tmp_path: Path) -> None:
    raw, digest = read_bytes(CONV)
    assert raw == gzip.decompress(CONV.read_bytes())
    two = tmp_path / "two.gz"
    two.write_bytes(gzip.compress(b"[1,") + gzip.compress(b"2]"))  # two members
    assert read_bytes(two)[0] == b"[1,2]"
    with pytest.raises(TooLarge):
        load_cache(CONV, max_bytes=1 << 20)  # 4.7 MB inflated
    assert load_cache(CONV).records


def test_the_limit_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTUNE_MAX_INFLATED_BYTES", str(1 << 20))
    with pytest.raises(TooLarge, match="limit of 1 MiB"):
        load_cache(CONV)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom", "directory"])
def test_special_files_are_refused_at_once(tmp_path: Path, special: str) -> None:
    if special == "fifo":
        path = tmp_path / "pipe.json"
        os.mkfifo(path)  # nothing ever writes to it: reading it would hang
    elif special == "directory":
        path = tmp_path
    else:
        path = Path(special)
    result: list[BaseException] = []

    def read() -> None:
        try:
            load_cache(path)
        except BaseException as exc:  # noqa: BLE001 - reported below
            result.append(exc)
        try:
            load_t1(path)
        except BaseException as exc:  # noqa: BLE001
            result.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), f"reading {special} hangs"
    assert len(result) == 2 and all(type(e) is FormatError for e in result), result
    assert all("not a regular file" in str(e) for e in result)


@pytest.mark.parametrize("args", [["import"], ["tune", "--budget", "3", "--replay"]])
@pytest.mark.parametrize("kind", ["bomb", "/dev/zero", "fifo"])
def test_the_cli_answers_hostile_files_with_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    kind: str,
) -> None:
    monkeypatch.setenv("KTUNE_MAX_INFLATED_BYTES", str(8 << 20))
    if kind == "bomb":
        path = str(bomb(tmp_path / "bomb.json.gz", 512 << 20))
    elif kind == "fifo":
        path = str(tmp_path / "pipe.json")
        os.mkfifo(path)
    else:
        path = kind
    code = main([*args, path, "--db", f"sqlite:///{tmp_path / 'log.db'}"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert ("limit of 8 MiB" if kind == "bomb" else "not a regular file") in lines[0]
    assert len(lines[0]) < 400
