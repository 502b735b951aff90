"""The rest-point census: which config each run holds as its best at a checkpoint, counted over
runs, with the knobs that separate it from the optimum; bad arguments are one-line errors."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from ktune.search_space.formats import load_cache
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "rest_points.py"
PNPOLY = SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz"
CONVOLUTION = PNPOLY.with_name("convolution_A4000.json.gz")


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


@cache
def _rec() -> RecordedSpace:
    return load_cache(PNPOLY)


def _ok_keys() -> list[str]:
    """The keys of the configs that ran, fastest first."""
    ok = [r for r in _rec().records.values() if r.status == "ok" and r.time_ms is not None]
    return [r.key for r in sorted(ok, key=lambda r: r.time_ms or 0.0)]


def test_runs_are_counted_at_the_config_they_hold_as_their_best() -> None:
    rp, rec = _module(), _rec()
    fastest, second, slow = _ok_keys()[0], _ok_keys()[1], _ok_keys()[-1]
    failed = next((r.key for r in rec.records.values() if r.status != "ok"), None)
    runs = {0: [slow, fastest], 1: [slow, second], 2: [second, slow], 3: [slow]}
    if failed is not None:
        runs[4] = [failed, failed]  # nothing ran: left out of the census
    at1 = rp.rest_points(rec, runs, 1)
    assert [(p.key, p.count) for p in at1] == [(slow, 3), (second, 1)]
    at2 = rp.rest_points(rec, runs, 2)
    assert [(p.key, p.count) for p in at2] == [(second, 2), (fastest, 1), (slow, 1)]
    assert at2[1].ratio == 1.0 and at2[1].differs == ()
    assert at2[0].ratio > 1.0
    assert rp.best_of(rec, [slow, second], 1) == (slow, at1[0].ratio)


def test_a_rest_point_names_the_knobs_that_separate_it_from_the_optimum() -> None:
    rp, rec = _module(), _rec()
    optimum = rec.optimum
    assert optimum is not None
    names = [p.name for p in rec.parameters]
    for key in _ok_keys()[1:50]:
        config = rec.records[key].config
        expected = tuple(n for n in names if config[n] != optimum.config[n])
        assert rp.differs_from_optimum(rec, key) == expected
        assert expected  # a different config differs in at least one knob


def test_auto_runs_through_the_job_path_and_every_run_is_counted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rp = _module()
    saved = tmp_path / "runs.json"
    assert rp.main([str(PNPOLY), str(CONVOLUTION), "--strategies", "auto", "--seeds", "3",
                    "--budget", "12", "--at", "12", "--top", "10",
                    "--json", str(saved)]) == 0  # fmt: skip
    doc = json.loads(saved.read_text())
    assert doc["budget"] == 12 and set(doc["runs"]) == {str(PNPOLY), str(CONVOLUTION)}
    for per_strategy in doc["runs"].values():
        assert sorted(per_strategy["auto"]) == ["0", "1", "2"]
        assert all(len(keys) == 12 for keys in per_strategy["auto"].values())
    out = capsys.readouterr().out
    reports = [r for r in out.split("### ") if r.startswith("auto on")]
    assert [r.split(" (")[0] for r in reports] == [
        "auto on recorded/pnpoly_RTX_3090",
        "auto on recorded/convolution_A4000",
    ]
    for report in reports:
        rows = [line for line in report.splitlines() if line.startswith("| `")]
        assert rows and sum(int(line.split("|")[2]) for line in rows) == 3
        assert "median best/optimum @12" in report
    misses = out.split("### Misses at 12")[1].splitlines()
    assert [line.split(" | ")[0] for line in misses if line.startswith("| recorded/")] == [
        "| recorded/pnpoly_RTX_3090",
        "| recorded/convolution_A4000",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategies", "nope"], "unknown nope"),
        (["--strategies", "random", "--set", "escape=False"], "auto is not among"),
        (["--at", "150"], "between 1 and the budget"),
        (["--at", "5,x"], "not a comma-separated list"),
        (["--set", "escape=1"], "does not match"),
        (["--seeds", "0"], "at least 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _module().main([str(PNPOLY), *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_file_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _module().main(["/nonexistent/space.json.gz", "--seeds", "1"])
    assert exit_info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_misses_are_sorted_by_the_knobs_to_the_nearest_config_within_5_percent() -> None:
    rp, rec = _module(), _rec()
    optimum = rec.optimum
    assert optimum is not None and optimum.time_ms is not None
    limit = 1.05 * optimum.time_ms
    near = [k.split(",") for k in _ok_keys() if (rec.records[k].time_ms or 0.0) <= limit]

    def distance(key: str) -> int:  # counted on the keys' values, apart from the script's way
        return min(
            sum(a != b for a, b in zip(key.split(","), other, strict=True)) for other in near
        )

    slow = [k for k in _ok_keys() if (rec.records[k].time_ms or 0.0) > limit]
    one = next(k for k in slow if distance(k) == 1)  # the fastest such
    far = next(k for k in reversed(slow) if distance(k) >= 3)
    assert rp.knobs_to_within(rec, [optimum.key, one, far]) == [0, 1, distance(far)]
    runs = {0: [far, optimum.key], 1: [one], 2: [far], 3: [far, one]}
    misses = rp.count_misses(rec, "auto", runs, 2)
    assert (misses.runs, misses.found) == (4, 1)
    assert misses.by_distance == {1: 2, distance(far): 1}
    assert rp.count_misses(rec, "auto", runs, 1).found == 0
