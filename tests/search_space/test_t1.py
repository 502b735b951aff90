"""T1 spec import: the bundled specs, their counts against the recorded caches, and errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ktune.search_space.formats import FormatError as ExportedFormatError
from ktune.search_space.formats.errors import FormatError
from ktune.search_space.formats.t1 import T1Spec, load_t1


def test_format_error_is_shared_and_a_value_error():
    assert ExportedFormatError is FormatError and issubclass(FormatError, ValueError)


def test_convolution_spec(recorded: Path):
    spec = load_t1(recorded / "convolution_t1.json")
    assert isinstance(spec, T1Spec)
    assert spec.name == "convolution_milo" and spec.space.name == "convolution_milo"
    assert spec.kernel_name == "convolution_kernel"
    assert spec.problem_size == (4096, 4096)
    assert spec.compiler_options == ("-std=c++11",)
    assert spec.space.names[:2] == ("block_size_x", "block_size_y")
    assert spec.space.parameters[1].values == (1, 2, 4, 8, 16)
    assert len(spec.space.constraints) == 4
    assert spec.raw["General"]["BenchmarkName"] == "convolution_milo"
    assert spec.space.cartesian_size == 16 * 5 * 4 * 4 * 2 * 2 * 2


def test_dedispersion_spec_with_chained_comparison(recorded: Path):
    spec = load_t1(recorded / "dedispersion_t1.json")
    assert spec.kernel_name == "dedispersion_kernel"
    assert spec.problem_size == (25000, 2048, 1)
    assert "32 <= block_size_x * block_size_y <= 1024" in [
        c.expression for c in spec.space.constraints
    ]
    assert len(spec.space) == 11130  # the configs in every Kernel Tuner cache of this kernel


def test_convolution_space_equals_the_recorded_cache(recorded: Path):
    spec = load_t1(recorded / "convolution_t1.json")
    with gzip.open(recorded / "convolution_A4000.json.gz", "rt") as f:
        cache = json.load(f)
    assert cache["tune_params_keys"] == list(spec.space.names)
    keys = {spec.space.key(c) for c in spec.space.configs(range(len(spec.space)))}
    assert len(spec.space) == 4362
    assert keys == set(cache["cache"])


def test_same_configs_and_product_order_as_kernel_tuner(recorded: Path):
    searchspace = pytest.importorskip("kernel_tuner.searchspace")
    for name in ("convolution_t1.json", "dedispersion_t1.json"):
        spec = load_t1(recorded / name)
        tune_params = {p.name: list(p.values) for p in spec.space.parameters}
        restrictions = [c.expression for c in spec.space.constraints]
        kt = searchspace.Searchspace(tune_params, restrictions, max_threads=1024)
        ours = [tuple(c.values()) for c in spec.space.configs(range(len(spec.space)))]
        assert set(ours) == set(kt.list)
        assert ours == kt.sorted_list()


def write(tmp_path: Path, data: object, name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def minimal(values: str = "[1, 2, 4]", kind: str = "int", conditions: list | None = None) -> dict:
    return {
        "General": {"BenchmarkName": "tiny"},
        "ConfigurationSpace": {
            "TuningParameters": [
                {"Name": "a", "Type": kind, "Values": values, "Default": 1},
                {"Name": "b", "Type": "int", "Values": "[1, 2]"},
            ],
            "Conditions": conditions
            if conditions is not None
            else [{"Expression": "a * b <= 4", "Parameters": ["a", "b"]}],
        },
        "KernelSpecification": {
            "KernelName": "k",
            "ProblemSize": [8, 8],
            "CompilerOptions": ["-O3"],
        },
    }


def test_minimal_spec_and_types(tmp_path: Path):
    spec = load_t1(write(tmp_path, minimal()))
    assert len(spec.space) == 5 and spec.kernel_name == "k" and spec.compiler_options == ("-O3",)
    assert spec.space.parameters[0].default == 1
    floats = load_t1(write(tmp_path, minimal("[1, 2.5]", "float", [])))
    assert (
        floats.space.parameters[0].values == (1.0, 2.5)
        and floats.space.parameters[0].kind == "float"
    )
    strings = load_t1(
        write(tmp_path, minimal("['x', 'y']", "string", [{"Expression": "a == 'x'"}]))
    )
    assert strings.space.configs(range(len(strings.space))) == [
        {"a": "x", "b": 1},
        {"a": "x", "b": 2},
    ]
    bools = load_t1(
        write(tmp_path, minimal("[False, True]", "bool", [{"Expression": "a or b == 2"}]))
    )
    assert len(bools.space) == 3
    no_kernel = minimal()
    del no_kernel["KernelSpecification"]
    bare = load_t1(write(tmp_path, no_kernel))
    assert bare.kernel_name == "" and bare.problem_size == () and bare.compiler_options == ()


def _broken(change):
    data = minimal()
    change(data)
    return data


BROKEN = [
    ("not json {", "not JSON"),
    ("[1, 2]", "not a T1 spec"),
    (_broken(lambda d: d.pop("ConfigurationSpace")), "missing ConfigurationSpace"),
    (
        _broken(lambda d: d["ConfigurationSpace"].pop("TuningParameters")),
        "TuningParameters is missing or empty",
    ),
    (minimal("[1, 2"), "is not a list literal"),
    (minimal("16"), "is not a non-empty list"),
    (minimal("[]"), "is not a non-empty list"),
    (minimal("__import__('os')"), "is not a list literal"),
    (minimal("[1, 'x']"), "are not all of Type int"),
    (minimal("[True, 2]"), "are not all of Type int"),
    (minimal("[1, 1]"), "lists a value twice"),
    (minimal("[1, 2]", "complex"), "unknown Type 'complex'"),
    (
        _broken(lambda d: d["ConfigurationSpace"]["TuningParameters"][0].pop("Name")),
        "TuningParameters[0] has no Name",
    ),
    (
        minimal(conditions=[{"Expression": "a * bogus <= 4"}]),
        "constraint 'a * bogus <= 4': unknown name 'bogus'",
    ),
    (minimal(conditions=[{"Expression": "a.real > 1"}]), "attribute access is not allowed"),
    (minimal(conditions=[{"Parameters": ["a"]}]), "Conditions[0] has no Expression"),
    (
        _broken(lambda d: d["ConfigurationSpace"].update(Conditions="a > 1")),
        "Conditions is not a list",
    ),
    (_broken(lambda d: d["KernelSpecification"].update(ProblemSize="4096")), "ProblemSize"),
    (_broken(lambda d: d["KernelSpecification"].update(CompilerOptions=[1])), "CompilerOptions"),
    # These escaped as RecursionError or ValueError, or loaded a value with no C literal.
    ('{"General": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ('{"General": {"BenchmarkName": ' + "1" * 5000 + "}}", "too many digits"),
    (minimal("[1.5, 1e999]", "float"), "Values '[1.5, 1e999]' are not all finite numbers"),
    (minimal("[1, " + "9" * 400 + "]", "float"), "are not all finite numbers"),
    (
        _broken(
            lambda d: d["ConfigurationSpace"]["TuningParameters"][0].update(
                Type="float", Values=[1.0, float("nan")]
            )
        ),
        "are not all finite numbers",
    ),
]


@pytest.mark.parametrize(("data", "problem"), BROKEN)
def test_errors_name_the_file_and_the_problem(tmp_path: Path, data, problem):
    path = write(tmp_path, data)
    with pytest.raises(FormatError) as info:
        load_t1(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_missing_file(tmp_path: Path):
    with pytest.raises(FormatError, match="no such file"):
        load_t1(tmp_path / "nope.json")
    with pytest.raises(FormatError, match="not a regular file"):
        load_t1(tmp_path)  # a directory
