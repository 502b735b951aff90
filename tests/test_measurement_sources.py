"""The measurement-source benchmark: every config ``auto`` measures is noted with the source
that planned it, noting changes nothing it proposes, and the counts say which source found
what."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from ktune.tuner.strategies.model_guided import SOURCES, ModelGuided
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "measurement_sources.py"
PNPOLY = SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz"


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


def test_every_measurement_is_noted_and_noting_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """60 measurements on a bundled recording: each has one of ``SOURCES``, the first ones
    are the space-filling start, the walk plans more of the rest than any other source, and
    the run measures what the direct path measures (the notes never steer the search)."""
    ms = _module()
    se = load_script(SCRIPT.with_name("search_efficiency.py"))
    rec = se.load_recording(PNPOLY)
    run = ms.run_sources(rec, 3, 60)
    assert len(run) == 60
    assert {source for source, _ in run} <= set(SOURCES)
    assert [source for source, _ in run[:8]] == ["space-filling"] * 8
    rest = Counter(source for source, _ in run[8:])
    assert rest.most_common(1)[0][0] == "walk"
    assert all(ratio is None or ratio >= 1.0 for _, ratio in run)
    noted = se.direct_keys(rec, "auto", 3, 60)
    monkeypatch.setattr(ModelGuided, "_noted", lambda self, picks, source: picks)
    assert se.direct_keys(rec, "auto", 3, 60) == noted


def test_counts_credit_gains_and_first_finds_to_their_source() -> None:
    ms = _module()
    found_by_lineage = [
        ("space-filling", 1.5),
        ("walk", 1.2),
        ("draw", None),  # failed: measured, never a gain
        ("walk", 1.195),  # under 1% better: not a gain
        ("lineage", 1.04),  # a gain and the first find within 5%
        ("walk", 1.0),  # a gain; already within 5%
    ]
    stuck = [("space-filling", 2.0), ("walk", 1.9), ("pooled", 1.3), ("recombination", 1.3)]
    counts = ms.count([found_by_lineage, stuck], after=2)
    assert counts.runs == 2 and counts.within == 1
    assert counts.first_within == {"lineage": 1}
    assert counts.measured == {"draw": 1, "walk": 2, "lineage": 1, "pooled": 1, "recombination": 1}
    assert counts.gains == {"lineage": 1, "walk": 1, "pooled": 1}
    out = ms.table("x/y", counts, 2)
    assert "| lineage | 1 | 1 | 100.0 | 1 |" in out and "| draw | 1 | 0 | 0.0 | 0 |" in out
    assert out.index("| walk |") < out.index("| pooled |") < out.index("| lineage |")


def test_bad_input_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    ms = _module()
    for argv, message in [
        (["/no/such.json.gz"], "no such file"),
        ([str(PNPOLY), "--set", "nope=1"], "auto has no setting 'nope'"),
        ([str(PNPOLY), "--seeds", "0"], "must be positive"),
    ]:
        assert ms.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("measurement_sources: ") and message in err
        assert "\n" not in err
