"""The derived-space benchmark: a window of a recording is a space of its own, written as a
cache the other benchmarks and Kernel Tuner read, with the recording's own times."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ktune.search_space.formats import load_recording
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "derived_spaces.py"
RECORDED = SCRIPT.parent.parent / "search_space" / "recorded"
CONVOLUTION = RECORDED / "convolution_A4000.json.gz"


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


def test_a_window_is_a_space_with_the_recordings_times(tmp_path: Path) -> None:
    """Each knob keeps a run of consecutive values; the space is every valid recorded config
    inside the window, failures included, with the recorded time; written and read back it
    is that space."""
    ds = _module()
    rec = load_recording(CONVOLUTION)
    found = ds.derive(rec, np.random.default_rng(7), configs=(200, 1500))
    assert found is not None
    assert 200 <= len(found.records) <= 1500 and found.knobs >= 3
    for p, q in zip(rec.parameters, found.parameters):
        positions = [p.values.index(v) for v in q.values]
        assert positions == list(range(positions[0], positions[0] + len(positions)))
    path = tmp_path / "window.json.gz"
    ds.write_derived(found, path)
    back = load_recording(path)
    assert len(back.space) == len(found.records)
    for r in found.records:
        again = back.lookup(r.config)
        assert again is not None and (again.status, again.time_ms) == (r.status, r.time_ms)
        assert rec.lookup(r.config) == r
    inside = {r.key for r in found.records}
    names = [p.name for p in found.parameters]
    windows = [set(p.values) for p in found.parameters]
    assert inside == {
        r.key
        for r in rec.records.values()
        if r.status != "invalid" and all(r.config[n] in w for n, w in zip(names, windows))
    }


def test_windows_meet_the_failure_floor_and_repeat_with_the_seed() -> None:
    ds = _module()
    rec = load_recording(CONVOLUTION)
    first = ds.derive(rec, np.random.default_rng(3), configs=(100, 2000), min_failed=0.05)
    again = ds.derive(rec, np.random.default_rng(3), configs=(100, 2000), min_failed=0.05)
    assert first is not None and again is not None
    assert first.failed_share >= 0.05
    assert [r.key for r in first.records] == [r.key for r in again.records]
    assert ds.derive(rec, np.random.default_rng(3), configs=(10**6, 10**7), tries=50) is None


def test_the_command_writes_caches_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _module()
    out = tmp_path / "spaces"
    assert ds.main([str(CONVOLUTION), "--out", str(out), "--per", "2", "--seed", "1"]) == 0
    written = sorted(out.glob("*.json.gz"))
    assert [p.name for p in written] == [
        "recorded_convolution_A4000_w1_0.json.gz",
        "recorded_convolution_A4000_w1_1.json.gz",
    ]
    assert all(300 <= len(load_recording(p).space) <= 3000 for p in written)
    assert ds.main([str(tmp_path / "missing.json.gz"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    for bad in (["--configs", "9-3"], ["--min-failed", "1.5"], ["--per", "0"]):
        with pytest.raises(SystemExit) as exc:
            ds.main([str(CONVOLUTION), "--out", str(out), *bad])
        assert exc.value.code == 2
