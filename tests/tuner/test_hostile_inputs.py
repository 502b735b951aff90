"""Hostile sizes and texts given to ``ktune tune``: a workload no machine could hold, a space of
10^12 configs, megabytes on one line. Each is one short error line and exit 2, refused before
anything large is allocated, and nothing is written to the log."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.search_space.enumeration import TooLarge, enumerate_ranks
from ktune.search_space.excerpt import MAX_EXCERPT, bounded, excerpt
from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace, SpaceError
from ktune.tuner.sources import SourceError, SourceRequest, request_options

BIG = "a" * 3_000_000  # 3 MB on one line


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err
    return code, err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err[:2000]
    return lines[0]


def no_jobs(url: str) -> bool:
    path = Path(url.removeprefix("sqlite:///"))
    if not path.exists():
        return True
    with TuningLog.open(url) as tlog:
        return not tlog.list_jobs()


# --- 1. the memory of a workload, at submission


@pytest.mark.parametrize(
    ("op", "shape"),
    [
        ("cpu_matmul", "20000x20000x20000"),
        ("cpu_matmul", "1000000000000x1000000000000x1000000000000"),
        ("cpu_conv2d", "100000x100000x100000x100000x3x3x3"),
        ("matmul", "1000000000000x1000000000000x1000000000000"),  # refused before any GPU
    ],
)
def test_a_workload_too_large_to_hold_is_one_line_naming_the_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, op: str, shape: str
) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    code, err = run(capsys, "tune", "--op", op, "--shape", shape, "--budget", "1", "--db", url)
    line = one_line(err)
    assert code == 2
    assert "is too large" in line and "KTUNE_MAX_WORKLOAD_BYTES" in line and "8 GiB" in line
    assert no_jobs(url)


def test_the_limit_is_each_operators_own_estimate_and_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def options(op: str, shape: str, dtype: str = "float32") -> object:
        return request_options(SourceRequest(operator=op, shape=shape, dtype=dtype))

    # float32 512^3: 3 MiB of arguments, 9 MiB with their float64 copies
    assert options("cpu_matmul", "512x512x512") is not None
    monkeypatch.setenv("KTUNE_MAX_WORKLOAD_BYTES", str(8 << 20))
    with pytest.raises(SourceError, match=r"about 9 MiB of memory, more than the limit of 8 MiB"):
        options("cpu_matmul", "512x512x512")
    with pytest.raises(SourceError, match="about 12 MiB"):  # float64: 6 MiB, and 6 MiB more
        options("cpu_matmul", "512x512x512", "float64")
    assert options("cpu_matmul", "512x512x256") is not None  # 2 MiB, and 4 MiB more
    explicit = SourceRequest(operator="cpu_matmul", shape="512x512x256", max_workload_bytes=1 << 20)
    with pytest.raises(SourceError, match="limit of 1 MiB"):
        request_options(explicit)


# --- 2. spaces too large to enumerate


def huge_t1(path: Path, conditions: list[str]) -> Path:
    """A T1 spec of four parameters of 1,000 values each: 10^12 configs."""
    spec = {
        "General": {"BenchmarkName": "huge"},
        "ConfigurationSpace": {
            "TuningParameters": [
                {"Name": f"p{i}", "Type": "int", "Values": str(list(range(1000)))} for i in range(4)
            ],
            "Conditions": [{"Expression": c} for c in conditions],
        },
        "KernelSpecification": {"KernelName": "k", "ProblemSize": [1]},
    }
    path.write_text(json.dumps(spec))
    return path


@pytest.mark.parametrize("conditions", [[], ["p0 < 10"]])
def test_a_t1_space_of_10_to_the_12_is_refused_before_it_is_allocated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, conditions: list[str]
) -> None:
    spec = huge_t1(tmp_path / "huge.json", conditions)
    url = f"sqlite:///{tmp_path / 'log.db'}"
    tracemalloc.start()
    started = time.monotonic()
    try:
        code, err = run(
            capsys, "tune", "--replay", "convolution_A4000", "--spec", str(spec), "--db", url
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    line = one_line(err)
    assert code == 2 and "more than 33,554,432 valid configs (of 1e+12)" in line
    assert time.monotonic() - started < 20 and peak < 200 << 20, peak
    assert no_jobs(url)


def test_enumeration_stops_at_its_limits_of_configs_and_work() -> None:
    params = [Parameter.of(f"p{i}", list(range(100))) for i in range(3)]
    with pytest.raises(SpaceError, match="more than 33,554,432 valid configs"):
        SearchSpace([*params, Parameter.of("q", list(range(1000)))])
    names = [p.name for p in params]
    columns = [np.asarray(p.values) for p in params]
    from ktune.search_space.constraints import parse_constraint

    never = [parse_constraint("p0 + p1 + p2 < 0", names)]
    with pytest.raises(TooLarge, match="examines more than 100,000 of its 1e\\+06"):
        enumerate_ranks(names, columns, never, max_rows=100_000)
    assert len(enumerate_ranks(names, columns, never)) == 0  # under the default limit
    some = [parse_constraint("p0 + p1 + p2 < 10", names)]
    with pytest.raises(TooLarge, match="more than 100 valid configs"):
        enumerate_ranks(names, columns, some, max_configs=100)
    assert len(enumerate_ranks(names, columns, some, max_configs=220)) == 220  # C(12, 3)


# --- 3. errors quote a short excerpt of the input


def test_excerpt_and_bounded() -> None:
    assert excerpt("4x4") == "'4x4'"
    cut = excerpt(BIG)
    assert cut == f"{'a' * MAX_EXCERPT!r}... (3,000,000 characters)"
    assert excerpt(list(range(10**5))).endswith("characters)")
    line = bounded("x" * 5000 + " choose from: a, b")
    assert len(line) < 1100 and line.endswith("choose from: a, b")


@pytest.mark.parametrize(
    "args",
    [
        ["--op", BIG, "--shape", "4x4x4"],
        ["--op", "cpu_matmul", "--shape", "4x4x4", "--dtype", BIG],
        ["--op", "cpu_matmul", "--shape", "4x4x4", "--layout", BIG],
        ["--op", "cpu_matmul", "--shape", "4x" + BIG],
        ["--replay", "convolution_A4000", "--strategy", BIG],
        ["--replay", "convolution_A4000", "--constraint", "block_size_x == " + BIG],
        ["--replay", BIG],  # a name too long for the file system, too
        ["--db", "nosuch://" + BIG, "--replay", "convolution_A4000"],
    ],
)
def test_megabytes_of_input_give_an_error_line_of_hundreds_of_characters(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code, err = run(capsys, "tune", *args, "--budget", "1")
    line = one_line(err)
    assert code == 2 and len(line) < 1100, line[:300]
    assert "characters" in line  # says how long the input was


def test_a_t1_spec_quoting_megabytes_is_quoted_in_part(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = huge_t1(tmp_path / "t1.json", [])
    data = json.loads(spec.read_text())
    data["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[" + BIG + "]"
    spec.write_text(json.dumps(data))
    code, err = run(capsys, "tune", "--replay", "convolution_A4000", "--spec", str(spec))
    line = one_line(err)
    assert code == 2 and len(line) < 600 and "Values '[aaaa" in line, line[:300]
