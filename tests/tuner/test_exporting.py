"""Which parameters an export is written with when a workload's trials span several spaces."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.search_space.formats import load_cache
from ktune.search_space.parameters import Parameter
from ktune.testing.recordings import kt_cache, write_kt_cache
from ktune.tuner.exporting import export_parameters

STORED = (Parameter.of("a", [1, 2]), Parameter.of("b", [1]))


def test_stored_parameters_when_they_cover_every_config() -> None:
    plan = export_parameters(STORED, [{"a": 1, "b": 1}, {"a": 2, "b": 1}])
    assert plan.parameters == STORED
    assert plan.included == (0, 1) and plan.left_out == 0


def test_values_of_a_grown_space_are_appended_in_order() -> None:
    plan = export_parameters(STORED, [{"a": 2, "b": 1}, {"a": 3, "b": 1}, {"a": 0, "b": 1}])
    assert [p.values for p in plan.parameters] == [(1, 2, 0, 3), (1,)]
    assert plan.left_out == 0


def test_other_names_take_the_newest_configs_names_and_leave_the_rest_out() -> None:
    configs = [{"a": 1, "b": 1}, {"x": 8, "y": "p"}, {"x": 4, "y": "q"}]
    plan = export_parameters(STORED, configs)
    assert [(p.name, p.values) for p in plan.parameters] == [("x", (4, 8)), ("y", ("p", "q"))]
    assert plan.included == (1, 2) and plan.left_out == 1


def test_no_configs_keeps_the_stored_parameters() -> None:
    plan = export_parameters(STORED, [])
    assert plan.parameters == STORED and plan.included == () and plan.left_out == 0


def _cache(path: Path, device: str, values: dict[str, list[int]]) -> Path:
    """A small brute-forced recording of kernel ``kern`` on ``device``: time = sum of the knobs."""
    return write_kt_cache(path, kt_cache(values, lambda c: sum(c.values()), device=device))


def test_export_of_a_space_that_grew_or_changed_under_the_same_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The same kernel and problem size recorded with other parameters (the Benchmark Hub has
    convolution with 6, 8 and 10 knobs): every device's trials export with their own set."""
    db = f"sqlite:///{tmp_path}/log.db"
    first = _cache(tmp_path / "x.json", "GPU X", {"a": [1, 2], "b": [1, 2]})
    grown = _cache(tmp_path / "y.json", "GPU Y", {"a": [1, 2, 3], "b": [1, 2]})
    other = _cache(tmp_path / "z.json", "GPU Z", {"c": [4, 8], "b": [1]})
    for f in (first, grown, other):
        assert main(["import", str(f), "--db", db]) == 0
    for device, source in (("GPU X", first), ("GPU Y", grown), ("GPU Z", other)):
        out = tmp_path / f"{device}.json"
        assert main(["export", "-w", "kern/100/-", "-d", device, "-o", str(out), "--db", db]) == 0
        written, original = load_cache(out), load_cache(source)
        assert {k: r.time_ms for k, r in written.records.items()} == {
            k: r.time_ms for k, r in original.records.items()
        }
        assert {p.name: set(p.values) for p in written.parameters} == {
            p.name: set(p.values) for p in original.parameters
        }
    capsys.readouterr()
    # one device with trials of two versions: the newest version's trials, and a note
    later = _cache(tmp_path / "x2.json", "GPU X", {"c": [4], "b": [1, 2]})
    assert main(["import", str(later), "--db", db]) == 0
    assert (
        main(
            [
                "export",
                "-w",
                "kern/100/-",
                "-d",
                "GPU X",
                "-o",
                str(tmp_path / "x2out.json"),
                "--db",
                db,
            ]
        )
        == 0
    )
    assert "note: 4 trials of an earlier version" in capsys.readouterr().out
    assert set(load_cache(tmp_path / "x2out.json").records) == {"4,1", "4,2"}
