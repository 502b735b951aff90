"""The search benchmark's interval on the fraction of runs within 5% of the optimum: what the
choice of seeds alone can move it by, so that a change inside it is not taken for a gain."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "search_efficiency.py"


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


def _runs(module: ModuleType, finals: list[float]) -> object:
    return module.Runs([np.full(100, v) for v in finals], [0.0] * len(finals))


def test_the_interval_holds_the_mean_and_narrows_with_more_seeds() -> None:
    se = _module()
    few = {Path("a"): _runs(se, [1.0] * 6 + [1.2] * 4)}  # 0.6 within 5%
    many = {Path("a"): _runs(se, [1.0] * 60 + [1.2] * 40)}
    low, high = se.within_interval(few)
    assert low < 0.6 < high and high - low > 0.3
    low_many, high_many = se.within_interval(many)
    assert low_many < 0.6 < high_many and high_many - low_many < (high - low) / 2
    assert se.within_interval(few) == (low, high)  # the same table twice


def test_every_run_found_or_exact_figures_have_no_spread() -> None:
    se = _module()
    exact = se.Runs([np.ones(100)], [0.0], exact_within={100: 0.25})
    both = {Path("a"): _runs(se, [1.0] * 30), Path("b"): exact}
    assert se.within_interval(both) == (0.625, 0.625)


def test_a_jobs_cost_counts_more_than_ask_and_tell(tmp_path: Path) -> None:
    """The benchmark's job time per measurement covers the whole job (start-up and log writes),
    so it is above the strategy's ask/tell time; the worst space's share is what the target
    is checked on."""
    se = _module()
    path = SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz"
    rec = se.load_recording(path)
    template = se.make_template(tmp_path, "empty", [])
    curve, tuner_ms, job_ms = se.run_ktune(path, rec, "auto", 0, 6, template, tmp_path)
    assert len(curve) == 6 and curve[-1] >= 1.0
    assert 0 < tuner_ms < job_ms
    a, b = Path("a"), Path("b")
    cells = se.cost_cells({a: [1.0, 3.0], b: [2.0, 2.0]}, {a: 100.0, b: 10.0})
    assert cells == "2.0 | 20.00%"  # median of all runs; b: 2 ms of a 10 ms measurement
    assert se.cost_cells({a: [float("nan")], b: [0.0]}, {a: 1.0, b: 1.0}) == "- | -"


def test_the_worst_run_is_printed_with_its_seed() -> None:
    """A tail worth a look can be replayed: the table names the seed of each space's worst run."""
    se = _module()
    runs = se.Runs([np.full(100, v) for v in (1.0, 1.6, 1.2)], [0.0] * 3, seeds=[7, 8, 9])
    assert runs.worst_cell(100) == "1.600 (8)"
    assert se.Runs([np.full(100, 1.3)], [0.0]).worst_cell(100) == "1.300"
    assert (
        se.Runs([np.ones(100)], [0.0], exact_quantiles={0.9: np.ones(100)}).worst_cell(100) == "-"
    )


def test_the_targets_are_checked_against_kernel_tuner_in_the_same_run() -> None:
    """With Kernel Tuner's strategies in the run, each of ktune's gets issue 26's targets as
    rows: met or not, with the figures and the spaces below the per-space floor."""
    se = _module()
    a, b = Path("k/a.json.gz"), Path("k/b.json.gz")

    def runs(finals: list[float], job_ms: float = float("nan")) -> object:
        r = _runs(se, finals)
        r.job_ms_per_measurement = [job_ms] * len(finals)
        return r

    table = {
        "ktune:auto": {a: runs([1.0] * 9 + [1.3], 1.0), b: runs([1.0] * 5 + [1.3] * 5, 1.0)},
        "KT:greywolf": {a: runs([1.1] * 10), b: runs([1.0] * 8 + [1.3] * 2)},
        "random (exact)": {
            a: se.Runs([np.full(100, 1.2)], [0.0], exact_within={100: 0.2}),
            b: se.Runs([np.full(100, 1.2)], [0.0], exact_within={100: 0.6}),
        },
    }
    rows = {row[1]: row for row in se.target_checks(table, {a: 100.0, b: 10.0})}
    assert rows["ahead of every Kernel Tuner strategy at 20 / 50 / 100"][2] == "no"  # 1.075 > 1.05
    floor = rows["per space within 5% by 100 at least random's and the best strategy's minus 0.1"]
    assert floor[2] == "no" and "1 of 2" in floor[3] and "k/b 0.50 against 0.80" in floor[3]
    assert rows["over spaces within 5% by 100 at least 0.8"][2:] == ("no", "0.700")
    assert rows["whole job under 5% of the measurement time (worst space)"][2:] == ("no", "10.00%")
    assert se.target_checks({"ktune:auto": table["ktune:auto"]}, {a: 1.0, b: 1.0}) == []


def test_parts_saved_with_json_merge_into_the_tables_of_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run split into parts over different spaces or strategies (``--json``) prints, with
    ``--merge``, the tables one run over all of them prints (the time columns aside: they are
    clocks); other runs of a strategy on a space already merged, or parts that differ in
    budget or in their draw of seeds, are refused with one error line."""
    se = _module()
    recorded = SCRIPT.parent.parent / "search_space" / "recorded"
    a, b = recorded / "pnpoly_RTX_3090.json.gz", recorded / "convolution_A4000.json.gz"
    common = ["--seeds", "2", "--budget", "20", "--modes", "none", "--kt", ""]

    def tables(argv: list[str]) -> list[str]:
        assert se.main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        # rows of the main table keep their medians and fractions; the cost cells are clocks
        return [
            " | ".join(line.split(" | ")[:5]) if line.startswith("| ktune:") else line
            for line in lines
            if line.startswith("|")
        ]

    def part(name: str, *argv: str) -> Path:
        tables([*argv, *common, "--json", str(tmp_path / name)])
        return tmp_path / name

    whole = tables([str(a), str(b), *common, "--strategies", "random,annealing"])
    parts = [
        part("a.json", str(a), "--strategies", "random,annealing"),
        part("b_random.json", str(b), "--strategies", "random"),
        part("b_annealing.json", str(b), "--strategies", "annealing"),
    ]
    merged = tables(["--merge", *map(str, parts)])
    assert merged == whole and any("pnpoly" in line for line in merged)
    assert any("ktune:annealing" in line for line in merged)
    # the same part twice is the same runs, taken once
    assert tables(["--merge", *map(str, parts), str(parts[0])]) == whole
    # parts over different spaces: the first table compares the strategies on the spaces they
    # all ran (here a alone: annealing did not run b), and says so
    assert se.main(["--merge", str(parts[0]), str(parts[1])]) == 0
    uneven = capsys.readouterr().out
    assert "this first table is over the 1 spaces they all ran (1 left out of it)" in uneven
    assert "over the 1 spaces every strategy ran: the lowest fraction" in uneven
    first = [ln for ln in tables(["--merge", str(parts[0])]) if ln.startswith("| ktune:random")]
    main_rows = uneven.split("per space, the tail")[0].splitlines()
    random_row = [ln for ln in main_rows if ln.startswith("| ktune:random")]
    assert [" | ".join(ln.split(" | ")[:5]) for ln in random_row] == first[:1]

    other = part("b_other.json", str(b), "--strategies", "random", "--first-seed", "7")
    with pytest.raises(SystemExit) as exit_:
        se.main(["--merge", str(parts[1]), str(other)])
    assert exit_.value.code == 2
    assert "other runs of ktune:random on" in capsys.readouterr().err
    # a part of another draw of seeds, even over other spaces, is not merged silently
    with pytest.raises(SystemExit) as exit_:
        se.main(["--merge", str(parts[0]), str(other)])
    assert exit_.value.code == 2
    assert "ran seeds 7-8; other runs in the parts ran seeds 0-1" in capsys.readouterr().err
    b30 = tmp_path / "b30.json"
    tables([str(b), *common[:3], "30", *common[4:], "--strategies", "random", "--json", str(b30)])
    with pytest.raises(SystemExit):
        se.main(["--merge", str(parts[0]), str(b30)])
    assert "budget 30" in capsys.readouterr().err


def test_bad_json_and_merge_arguments_are_one_error_line_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--json`` path that cannot be written is refused before the runs (not after them),
    and ``--merge`` given recordings too is refused."""
    se = _module()
    recorded = str(SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz")
    for argv, message in (
        ([recorded, "--json", str(tmp_path / "missing" / "x.json")], "--json: no directory"),
        ([recorded, "--merge", str(tmp_path / "x.json")], "give it no recordings"),
    ):
        with pytest.raises(SystemExit) as exit_:
            se.main(argv)
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_a_failed_save_still_prints_the_tables_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When ``--json`` cannot be written after the runs (here: the path is a directory), the
    tables are printed all the same, the failure is one error line and the exit code is 1."""
    se = _module()
    recorded = str(SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz")
    (tmp_path / "out.json").mkdir()
    argv = [recorded, "--seeds", "1", "--budget", "5", "--modes", "none"]
    argv += ["--strategies", "random", "--kt", "", "--json", str(tmp_path / "out.json")]
    assert se.main(argv) == 1
    out, err = capsys.readouterr()
    assert "### mode: none" in out
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: could not save the runs to")


def test_the_per_space_table_gives_the_median_at_20(capsys: pytest.CaptureFixture[str]) -> None:
    """The targets are judged at 20, 50 and 100 measurements, so the per-space medians include
    @20 (a table of @10 alone was once read as @20)."""
    se = _module()
    curve = np.concatenate([np.full(10, 9.0), np.full(10, 3.0), np.full(80, 1.0)])
    curve[19] = 2.5  # the 20th measurement
    table = {"ktune:auto": {Path("conv/A100.json.gz"): se.Runs([curve], [0.0])}}
    se.print_table("none", table, {Path("conv/A100.json.gz"): 1.0}, 1, 100)
    out = capsys.readouterr().out
    assert "median best/optimum @10 / @20 / @50 / @100" in out
    assert "| ktune:auto | 9.000 / 2.500 / 1.000 / 1.000 |" in out


def test_kernel_tuner_runs_on_a_ktt_recording_written_as_a_cache(tmp_path: Path) -> None:
    from ktune.search_space.formats import load_cache, load_recording
    from ktune.testing.ktt import ktt_document, write_json
    from ktune.testing.recordings import RECORDED

    cache = load_cache(RECORDED / "convolution_A4000.json.gz")
    path = write_json(tmp_path / "KTConvolutionOutput_A4000.json.gz", ktt_document(cache))
    run = _module().run_kernel_tuner(path, "genetic_algorithm", 15, seed=4)
    rec = load_recording(path)
    assert len(run.keys) == 15 and all(k in rec.records for k in run.keys)


def test_direct_runs_measure_what_the_job_path_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--direct`` (no tuning log) saves the same curves as the job path, with no job
    timing; it takes only the empty-log mode."""
    se = _module()
    pnpoly = SCRIPT.parent.parent / "search_space" / "recorded" / "pnpoly_RTX_3090.json.gz"
    common = [str(pnpoly), "--seeds", "1", "--first-seed", "4", "--budget", "30"]
    common += ["--modes", "none", "--strategies", "auto", "--kt", ""]
    saved = []
    for extra in ([], ["--direct"]):
        out = tmp_path / f"run{len(saved)}.json"
        assert se.main([*common, *extra, "--json", str(out)]) == 0
        saved.append(se.merge_saved([out]).results["none"]["ktune:auto"][pnpoly])
    job, direct = saved
    assert np.array_equal(job.curves[0], direct.curves[0])
    assert all(np.isnan(direct.job_ms_per_measurement))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        se.main([str(pnpoly), "--direct", "--modes", "none,transfer"])
    assert exc.value.code == 2
    assert "--direct" in capsys.readouterr().err
