"""The paired trial benchmark: settings are parsed (never evaluated) and checked against
``auto``'s, each arm runs with its own settings and ``auto`` is left as it was, and the paired
difference is what the two arms' runs say."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from ktune.tuner.strategies.auto import AutoSearch
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "search_trials.py"
PNPOLY = SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz"


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


def test_settings_are_parsed_literals_of_the_settings_type() -> None:
    st = _module()
    assert st.parse_setting("patience_per_knob=3") == ("patience_per_knob", 3)
    assert st.parse_setting(" escape = False ") == ("escape", False)
    assert st.parse_setting("slice_min_effect=None") == ("slice_min_effect", None)
    for bad, reason in [
        ("patience_per_knob", "NAME=VALUE"),
        ("no_such_knob=1", "no setting"),
        ("_refresh=1", "no setting"),
        ("ask=1", "method"),
        ("escape=1", "does not match"),
        ("plan_size=4.5", "does not match"),
        ("plan_size=__import__('os').getpid()", "not a Python literal"),
    ]:
        with pytest.raises(ValueError, match=reason):
            st.parse_setting(bad)


def test_a_setting_holds_for_its_arm_only() -> None:
    st = _module()
    before = AutoSearch.plan_size
    with st.applied({"plan_size": 16, "escape": False}):
        assert AutoSearch.plan_size == 16 and AutoSearch.escape is False
    assert AutoSearch.plan_size == before and AutoSearch.escape is True
    with pytest.raises(RuntimeError), st.applied({"plan_size": 2}):
        raise RuntimeError
    assert AutoSearch.plan_size == before
    assert "plan_size" in AutoSearch.__dict__  # restored as it was, not left to a base class


def test_the_paired_difference_counts_runs_that_changed_sides() -> None:
    st = _module()
    found, stuck = [1.0, 1.0], [1.3, 1.2]
    before = {"a": {0: stuck, 1: found, 2: found, 3: stuck}, "b": {s: found for s in range(4)}}
    after = {"a": {0: found, 1: found, 2: found, 3: stuck}, "b": {s: found for s in range(4)}}
    mean, se, low, high = st.paired_difference(before, after)
    assert mean == pytest.approx(0.125)  # one of 8 runs (seed 0 on "a") found by the change
    assert se == pytest.approx(0.125)  # per seed over spaces 0.5, 0, 0, 0
    assert 0.0 <= low <= mean <= high <= 0.5
    assert st.paired_difference(before, before)[:2] == (0.0, 0.0)


def test_a_trial_runs_both_arms_through_the_job_path(capsys: pytest.CaptureFixture[str]) -> None:
    """Three seeds of 30 measurements on a bundled recording: without the escape the runs
    differ from auto's, each arm's table is printed, and auto is left as it was."""
    st = _module()
    trial = st.run_trial([str(PNPOLY)], [0, 1, 2], {"escape": False}, 30, processes=1)
    base, changed = trial.curves["as is"][str(PNPOLY)], trial.curves["changed"][str(PNPOLY)]
    assert sorted(base) == sorted(changed) == [0, 1, 2]
    assert all(1.0 <= row[-1] <= row[0] for row in [*base.values(), *changed.values()])
    assert base != changed  # the escape changes what 30 measurements find
    slow = [
        *trial.slow["as is"][str(PNPOLY)].values(),
        *trial.slow["changed"][str(PNPOLY)].values(),
    ]
    assert len(slow) == 6 and all(0.0 <= v <= 1.0 for v in slow)
    assert AutoSearch.escape is True
    st.print_report(trial, {"escape": False}, 30)
    out = capsys.readouterr().out
    assert "| recorded/pnpoly_RTX_3090 | changed |" in out and "paired difference" in out
    assert "| slow |" in out


def test_both_arms_merge_with_search_efficiency_parts(tmp_path: Path) -> None:
    """``--part`` and ``--changed-part`` write the arms in ``search_efficiency.py --json``'s
    format: merged back, they are ``ktune:auto``'s and ``ktune:auto[escape=False]``'s runs on
    the trial's space, seed for seed."""
    st = _module()
    merge_saved = load_script(SCRIPT.with_name("search_efficiency.py")).merge_saved
    space = str(PNPOLY)
    trial_argv = [space, "--set", "escape=False", "--seeds", "2", "--first-seed", "3"]
    parts = [tmp_path / "auto.json", tmp_path / "changed.json"]
    argv = [*trial_argv, "--budget", "25", "--processes", "1", "--direct", "--json"]
    argv += [str(tmp_path / "trial.json"), "--part", str(parts[0])]
    assert st.main([*argv, "--changed-part", str(parts[1])]) == 0
    curves = json.loads((tmp_path / "trial.json").read_text())["runs"]
    merged = merge_saved(parts)
    assert merged.seeds == 2 and merged.budget == 25
    for name, arm in (("ktune:auto", "as is"), ("ktune:auto[escape=False]", "changed")):
        runs = merged.results["none"][name][PNPOLY]
        assert runs.seeds == [3, 4]
        for seed, curve in zip(runs.seeds, runs.curves):
            assert curve.tolist() == curves[arm][space][str(seed)]
    assert curves["as is"][space] != curves["changed"][space]


def test_the_direct_path_proposes_what_the_job_path_measures(tmp_path: Path) -> None:
    """``--direct`` screens a change without the job path: on a recording with cheap
    measurements (refits spaced out by their cost) and one with failed configs, the strategy
    alone proposes what the job measures, config for config, with a setting applied too."""
    st = _module()
    se = load_script(SCRIPT.with_name("search_efficiency.py"))
    template = se.make_template(tmp_path, "empty", [])
    for path in (PNPOLY, PNPOLY.with_name("convolution_A4000.json.gz")):
        rec = se.load_recording(path)
        for seed, settings in ((0, {}), (1, {"recombination_parents": 0})):
            with st.applied(settings):
                jobs, _, _ = se.job_keys(path, "auto", seed, 60, template, tmp_path)
                direct = se.direct_keys(rec, "auto", seed, 60)
            assert len(jobs) == 60 and direct == jobs
    trial = st.run_trial([str(PNPOLY)], [0, 1], {"escape": False}, 30, processes=1, direct=True)
    assert trial.curves["as is"][str(PNPOLY)] != trial.curves["changed"][str(PNPOLY)]


def test_slow_measurements_are_counted_against_the_best_before_them() -> None:
    """After the first two, a measurement is slow when it ran and took more than 5 times the
    best measured before it; a failed run is not slow, and the best moves as the run finds."""
    st = _module()
    times = {"a": 10.0, "b": 4.0, "c": 25.0, "d": 19.0, "e": 1.0, "f": 6.0, "g": None}
    rec = SimpleNamespace(
        records={
            k: SimpleNamespace(status="ok" if t else "error", time_ms=t) for k, t in times.items()
        }
    )
    # after a, b (best 4): c 25 > 20 slow, d 19 not, e 1 new best, f 6 > 5 slow, g failed
    assert st.slow_share(rec, list("abcdefg"), after=2) == pytest.approx(2 / 5)
    assert st.slow_share(rec, list("abcdefg"), after=2, factor=10.0) == 0.0
    assert math.isnan(st.slow_share(rec, list("ab"), after=2))


def test_bad_input_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    st = _module()
    for argv, message in [
        ([str(PNPOLY)], "give at least one --set"),
        ([str(PNPOLY), "--set", "nope=1"], "auto has no setting 'nope'"),
        (["/no/such.json.gz", "--set", "escape=False"], "no such file"),
        ([str(PNPOLY), "--set", "escape=False", "--seeds", "1"], "--seeds must be"),
        ([str(PNPOLY), "--set", "escape=False", "--part", "/no/d/a"], "--part: no directory"),
        (
            [str(PNPOLY), "--set", "escape=False", "--changed-part", "/no/d/a"],
            "--changed-part: no directory",
        ),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            st.main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
