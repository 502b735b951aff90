"""Kernel Tuner cache files: loading the bundled spaces, rejecting bad files, round trips,
and Kernel Tuner itself replaying what we export."""

from __future__ import annotations

import gzip
import hashlib
import json
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ktune.search_space import recorded as recorded_package
from ktune.search_space.formats import (
    FormatError,
    RecordedSpace,
    load_cache,
    write_cache,
    write_recording,
)
from ktune.search_space.parameters import Parameter

RECORDED = Path(recorded_package.__file__).parent
CONVOLUTION = RECORDED / "convolution_A4000.json.gz"
PNPOLY = RECORDED / "pnpoly_RTX_3090.json.gz"


@pytest.fixture(scope="module")
def convolution() -> RecordedSpace:
    return load_cache(CONVOLUTION)


@pytest.fixture(scope="module")
def pnpoly() -> RecordedSpace:
    return load_cache(PNPOLY)


def _small_cache() -> dict[str, Any]:
    """A valid four-record cache: one of each status but InvalidConfig, plus an invalid one."""

    def entry(a: int, b: int, time: object, times: list[float] | None = None) -> dict[str, Any]:
        e: dict[str, Any] = {
            "a": a,
            "b": b,
            "time": time,
            "compile_time": 10.0,
            "benchmark_time": 5.0,
        }
        if times is not None:
            e["times"] = times
        return e

    return {
        "device_name": "NVIDIA Test GPU",
        "kernel_name": "tiny_kernel",
        "problem_size": [64, 32],
        "tune_params_keys": ["a", "b"],
        "tune_params": {"a": [1, 2], "b": [8, 16]},
        "objective": "time",
        "cache": {
            "1,8": entry(1, 8, 2.5, [2.5, 2.6]),
            "1,16": entry(1, 16, 1.5, [1.5]),
            "2,8": entry(2, 8, "CompilationFailedConfig"),
            "2,16": entry(2, 16, "InvalidConfig"),
        },
    }


def _kt_open_layout(data: dict[str, Any]) -> str:
    """What Kernel Tuner leaves on disk while tuning: the header, records, no closing braces."""
    header = dict(data, cache={})
    text = json.dumps(header, indent="")[:-3]
    return text + "".join("\n" + json.dumps({k: v})[1:-1] + "," for k, v in data["cache"].items())


# ---------------------------------------------------------------------------- bundled files


def test_convolution_loads(convolution: RecordedSpace) -> None:
    rs = convolution
    assert len(rs.records) == 4362
    assert Counter(r.status for r in rs.records.values()) == {
        "ok": 4201,
        "runtime_error": 155,
        "compile_error": 6,
    }
    assert len(rs.space) == 4362  # no InvalidConfig records in this file
    assert (rs.device_name, rs.kernel_name, rs.objective) == (
        "NVIDIA RTX A4000",
        "convolution_kernel",
        "time",
    )
    assert rs.problem_size == (4096, 4096)
    assert [p.name for p in rs.parameters][:2] == ["block_size_x", "block_size_y"]
    assert rs.digest == hashlib.sha256(CONVOLUTION.read_bytes()).hexdigest()
    assert rs.workload().key == "convolution_kernel/4096x4096/-"


def test_convolution_optimum_and_lookup(convolution: RecordedSpace) -> None:
    rs = convolution
    best = rs.optimum
    assert best is not None and best.key == "256,1,2,4,0,0,0,1,15,15"
    assert best.time_ms == pytest.approx(1.021171996369958)
    assert best.time_ms == min(r.time_ms for r in rs.records.values() if r.time_ms is not None)

    raw = json.loads(gzip.decompress(CONVOLUTION.read_bytes()))["cache"]["16,1,1,1,0,0,0,1,15,15"]
    config = {p.name: raw[p.name] for p in rs.parameters}
    record = rs.lookup(config)
    assert record is not None and record.status == "ok"
    assert record.time_ms == raw["time"] and record.times_ms == tuple(raw["times"])
    assert (record.compile_ms, record.bench_ms) == (raw["compile_time"], raw["benchmark_time"])
    assert rs.space.index(record.config) is not None

    failed = rs.records["80,8,3,4,0,1,1,1,15,15"]
    assert failed.status == "compile_error" and failed.time_ms is None and failed.times_ms == ()
    assert rs.lookup(dict(config, block_size_x=17)) is None
    assert rs.lookup({"block_size_x": 16}) is None


def test_median_measurement_cost_counts_failed_compiles(convolution: RecordedSpace) -> None:
    def median(records: list) -> float:
        return statistics.median(r.compile_ms + r.bench_ms for r in records)

    tried = [r for r in convolution.records.values() if r.status != "invalid"]
    ran = [r for r in tried if r.status == "ok"]
    assert len(ran) < len(tried)  # failed compiles cost time too
    assert convolution.median_measurement_ms == pytest.approx(median(tried))
    assert median(tried) != median(ran)


def test_pnpoly_loads(pnpoly: RecordedSpace) -> None:
    rs = pnpoly
    assert len(rs.records) == len(rs.space) == 4092 == 4 * 31 * 11 * 3
    assert Counter(r.status for r in rs.records.values()) == {"ok": 3762, "runtime_error": 330}
    assert rs.problem_size == (20000000,)  # an int in the file
    assert rs.workload().key == "cn_pnpoly/20000000/-"
    assert rs.optimum is not None and rs.optimum.key == "0,256,20,2"


def test_invalid_records_are_kept_but_not_in_the_space(tmp_path: Path) -> None:
    path = tmp_path / "small.json"
    path.write_text(json.dumps(_small_cache()))
    rs = load_cache(path)
    assert len(rs.records) == 4 and len(rs.space) == 3
    invalid = rs.lookup({"a": 2, "b": 16})
    assert invalid is not None and invalid.status == "invalid"
    assert rs.space.index({"a": 2, "b": 16}) is None
    assert rs.optimum is not None and rs.optimum.key == "1,16"


def test_a_recording_without_a_device_name_is_an_unknown_gpu_of_its_own(tmp_path: Path) -> None:
    """Kernel Tuner writes ``device_name: ""`` when the driver reports none (Benchmark Hub's
    MI250X recordings): still a recording to tune and import, of a device nobody can match."""
    names = set()
    for i, time in enumerate((2.5, 3.5)):
        data = _small_cache()
        data["device_name"] = " " if i else ""
        data["cache"]["1,8"]["time"] = time
        path = tmp_path / f"unnamed{i}.json"
        path.write_text(json.dumps(data))
        rs = load_cache(path)
        assert rs.device_name == f"unknown GPU (recording {rs.digest[:12]})"
        names.add(rs.device_name)
    assert len(names) == 2  # two unnamed recordings are two devices


# ---------------------------------------------------------------------------- robust loading


def test_gzip_is_detected_by_content_not_suffix(tmp_path: Path) -> None:
    data = json.dumps(_small_cache()).encode()
    (tmp_path / "zipped.json").write_bytes(gzip.compress(data))
    (tmp_path / "plain.json.gz").write_bytes(data)
    assert len(load_cache(tmp_path / "zipped.json").records) == 4
    assert len(load_cache(tmp_path / "plain.json.gz").records) == 4


def test_unterminated_cache_as_kernel_tuner_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "open.json"
    path.write_text(_kt_open_layout(_small_cache()))
    closed = tmp_path / "closed.json"
    closed.write_text(json.dumps(_small_cache()))
    assert dict(load_cache(path).records) == dict(load_cache(closed).records)


def test_cache_written_by_kernel_tuner_store_cache(tmp_path: Path) -> None:
    """Kernel Tuner's own writer (``store_cache``) appends records to an open cache file."""
    kt_util = pytest.importorskip("kernel_tuner.util")
    data = _small_cache()
    path = tmp_path / "kt.json"
    path.write_text(json.dumps(dict(data, cache={}), indent="")[:-3])  # as process_cache does
    cache: dict[str, Any] = {}
    for key, entry in data["cache"].items():
        kt_util.store_cache(key, entry, str(path), cache)
    assert path.read_text().endswith(",")  # still open
    assert len(load_cache(path).records) == 4


Mutation = Callable[[dict[str, Any]], None]


def _set(field: str, value: object) -> Mutation:
    return lambda d: d.__setitem__(field, value)


def _record(key: str, field: str, value: object) -> Mutation:
    return lambda d: d["cache"][key].__setitem__(field, value)


def _rekey(old: str, new: str) -> Mutation:
    return lambda d: d["cache"].__setitem__(new, d["cache"].pop(old))


BAD_CACHES: dict[str, tuple[Mutation, str]] = {
    "missing device_name": (lambda d: d.pop("device_name"), "missing header field"),
    "missing tune_params": (lambda d: d.pop("tune_params"), "missing header field"),
    "missing cache": (lambda d: d.pop("cache"), "missing header field"),
    "keys do not match tune_params": (_set("tune_params_keys", ["a", "c"]), "do not match"),
    "empty value list": (lambda d: d["tune_params"].__setitem__("a", []), "bad tune_params"),
    "callable problem size": (_set("problem_size", "callable"), "problem_size"),
    "empty cache": (_set("cache", {}), "no records"),
    "all invalid": (
        lambda d: d.__setitem__(
            "cache", {k: dict(e, time="InvalidConfig") for k, e in d["cache"].items()}
        ),
        "space is empty",
    ),
    "key does not match values": (_rekey("1,8", "2,2"), "does not match"),
    "value not in list": (
        lambda d: d["cache"].__setitem__("3,8", dict(d["cache"].pop("1,8"), a=3)),
        "not among the values",
    ),
    "bool for an int": (
        lambda d: d["cache"].__setitem__("True,8", dict(d["cache"].pop("1,8"), a=True)),
        "not among the values",
    ),
    "record lacks a parameter": (lambda d: d["cache"]["1,8"].pop("b"), "lacks parameter 'b'"),
    "record not an object": (lambda d: d["cache"].__setitem__("1,8", 2.5), "not an object"),
    "unknown failure string": (_record("1,8", "time", "Oops"), "neither a number"),
    "null time": (_record("1,8", "time", None), "neither a number"),
    "no time": (lambda d: d["cache"]["1,8"].pop("time"), "has no time"),
    "negative time": (_record("1,8", "time", -1.0), "time -1.0 is not a number of milliseconds"),
    "NaN time": (_record("1,8", "time", float("nan")), "time nan is not a number"),
    "infinite time": (_record("1,8", "time", float("inf")), "time inf is not a number"),
    "string in times": (_record("1,8", "times", [1.0, "x"]), "times"),
    "NaN in times": (_record("1,8", "times", [1.0, float("nan")]), "times"),
    "negative compile time": (_record("1,8", "compile_time", -3), "compile_time"),
    # Each of these escaped as a RecursionError, OverflowError or plain ValueError, or loaded
    # and broke later (a 500 of the service, a failing `ktune best -f header`).
    "times whose sum overflows": (
        _record("1,8", "times", [1e308, 1e308]),
        "record '1,8': times must each be a number of milliseconds from 0 to 1e+12",
    ),
    # One such record is finite, but a job's clock sums them: it read "inf h".
    "compile time of centuries": (
        _record("1,8", "compile_time", 1e308),
        "compile_time 1e+308 is not a number of milliseconds from 0 to 1e+12",
    ),
    "time of centuries": (_record("1,8", "time", 1e13), "time 10000000000000.0 is not"),
    "inf and -inf in times": (_record("1,8", "times", [float("inf"), -float("inf")]), "times"),
    "int time beyond floats": (_record("1,8", "time", 10**400), "time 1000"),
    "int in times beyond floats": (_record("1,8", "times", [10**400]), "times"),
    "int compile time beyond floats": (_record("1,8", "compile_time", 10**400), "compile_time"),
    "empty kernel_name": (_set("kernel_name", ""), "kernel_name '' cannot name a workload"),
    "kernel_name with a slash": (_set("kernel_name", "a/b"), "kernel_name 'a/b'"),
    "kernel_name ending in a newline": (_set("kernel_name", "k\n"), "kernel_name 'k\\n'"),
    "NaN parameter value": (
        lambda d: d["tune_params"].__setitem__("a", [1, float("nan")]),
        "bad tune_params: parameter 'a': value nan is not a finite number",
    ),
    "float and an int beyond floats": (
        lambda d: d["tune_params"].__setitem__("b", [8.5, 10**400]),
        "bad tune_params: int too large to convert to float",
    ),
    "infinite parameter value": (
        lambda d: d["tune_params"].__setitem__("b", [8.0, float("inf")]),
        "bad tune_params: parameter 'b': value inf is not a finite number",
    ),
}


@pytest.mark.parametrize("mutate,expected", BAD_CACHES.values(), ids=BAD_CACHES.keys())
def test_bad_cache_gives_one_line_format_error(
    tmp_path: Path, mutate: Mutation, expected: str
) -> None:
    data = _small_cache()
    mutate(data)
    path = tmp_path / "bad_cache.json"
    path.write_text(json.dumps(data))
    _assert_format_error(path, expected)


BAD_BYTES: dict[str, tuple[bytes, str]] = {
    "empty file": (b"", "empty"),
    "blank file": (b"  \n\n", "empty"),
    "not JSON": (b"hello, world", "not JSON"),
    "JSON list": (b"[1, 2, 3]", "not a JSON object"),
    "not UTF-8": (b"\xff\xfe\x00garbage", "UTF-8"),
    "truncated gzip": (gzip.compress(json.dumps(_small_cache()).encode())[:-30], "gzip"),
    "gzip of nothing": (gzip.compress(b""), "empty"),
    "cut in a record": (json.dumps(_small_cache()).encode()[:-60], "not JSON"),
    "nested 100000 deep": (
        b'{"device_name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "nested too deeply",
    ),
    "int of 5000 digits": (
        json.dumps(_small_cache()).replace("2.5", "1" * 5000, 1).encode(),
        "too many digits",
    ),
    "open cache with an int of 5000 digits": (
        _kt_open_layout(_small_cache()).replace("2.5", "1" * 5000, 1).encode(),
        "too many digits",
    ),
}


@pytest.mark.parametrize("content,expected", BAD_BYTES.values(), ids=BAD_BYTES.keys())
def test_bad_bytes_give_one_line_format_error(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "bad_bytes.json.gz"
    path.write_bytes(content)
    _assert_format_error(path, expected)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    _assert_format_error(tmp_path / "nowhere.json", "no such file")
    (tmp_path / "a_dir.json").mkdir()
    _assert_format_error(tmp_path / "a_dir.json", "not a regular file")


def _assert_format_error(path: Path, expected: str) -> None:
    with pytest.raises(FormatError) as info:
        load_cache(path)
    message = str(info.value)
    assert "\n" not in message
    assert path.name in message
    assert expected in message
    error = info.value  # no chained traceback: "During handling of the above exception..."
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


# ---------------------------------------------------------------------------- export


def _export(rs: RecordedSpace, path: Path, **overrides: Any) -> None:
    args: dict[str, Any] = {
        "device_name": rs.device_name,
        "kernel_name": rs.kernel_name,
        "problem_size": rs.problem_size,
        "parameters": rs.parameters,
        "records": rs.records.values(),
        "objective": rs.objective,
    }
    write_cache(path, **(args | overrides))


@pytest.mark.parametrize("name", ["again.json", "again.json.gz"])
def test_round_trip(convolution: RecordedSpace, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    _export(convolution, path)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    again = load_cache(path)
    assert dict(again.records) == dict(convolution.records)
    assert list(again.records) == list(convolution.records)
    assert again.parameters == convolution.parameters
    assert (again.device_name, again.kernel_name, again.problem_size, again.objective) == (
        convolution.device_name,
        convolution.kernel_name,
        convolution.problem_size,
        convolution.objective,
    )
    assert len(again.space) == len(convolution.space)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left behind


def test_export_keeps_kernel_tuner_layout(pnpoly: RecordedSpace, tmp_path: Path) -> None:
    path = tmp_path / "pnpoly.json"
    _export(pnpoly, path, problem_size=20000000)
    text = path.read_text()
    assert text.endswith("}\n}")  # what Kernel Tuner's correct_open_cache takes as closed
    data = json.loads(text)
    assert list(data) == [
        "device_name",
        "kernel_name",
        "problem_size",
        "tune_params_keys",
        "tune_params",
        "objective",
        "cache",
    ]
    assert data["problem_size"] == 20000000
    entry = data["cache"]["0,32,1,0"]
    for name in (
        "time",
        "times",
        "compile_time",
        "verification_time",
        "benchmark_time",
        "framework_time",
        "strategy_time",
        "timestamp",
    ):
        assert name in entry


@dataclass
class Trial:
    """A tuning-log trial as the tuner holds it: no key, no framework time."""

    config: dict[str, Any]
    status: str
    time_ms: float | None
    times_ms: list[float] = field(default_factory=list)
    compile_ms: float = 100.0
    bench_ms: float = 20.0


def test_export_trials_maps_statuses(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    params = [Parameter.of("a", [1, 2, 3]), Parameter.of("b", [8, 16])]
    trials = [
        Trial({"a": 1, "b": 8}, "ok", 2.0, [2.0, 2.1]),
        Trial({"a": 1, "b": 8}, "ok", 9.0, [9.0]),  # a repeat: the first one wins
        Trial({"a": np.int64(2), "b": 8}, "compile_error", None),
        Trial({"a": 3, "b": 8}, "timeout", None),
        Trial({"a": 1, "b": 16}, "wrong_result", None),
        Trial({"a": 2, "b": 16}, "runtime_error", None),
        Trial({"a": 3, "b": 16}, "invalid", None),
    ]
    path = tmp_path / "trials.json"
    write_cache(
        path,
        device_name="Dev",
        kernel_name="k",
        problem_size=[10],
        parameters=params,
        records=trials,
    )
    times = {k: e["time"] for k, e in json.loads(path.read_text())["cache"].items()}
    assert times == {
        "1,8": 2.0,
        "2,8": "CompilationFailedConfig",
        "3,8": "RuntimeFailedConfig",
        "1,16": "RuntimeFailedConfig",
        "2,16": "RuntimeFailedConfig",
        "3,16": "InvalidConfig",
    }
    rs = load_cache(path)
    assert rs.records["1,8"].times_ms == (2.0, 2.1) and rs.records["1,8"].framework_ms == 0.0
    assert rs.records["3,8"].status == "runtime_error" and len(rs.space) == 5


@pytest.mark.parametrize(
    "trial,message",
    [
        (Trial({"a": 1}, "ok", 1.0), "lacks parameter 'b'"),
        (Trial({"a": 4, "b": 8}, "ok", 1.0), "not among the values"),
        (Trial({"a": 1, "b": 8}, "ok", None), "has time None"),
        (Trial({"a": 1, "b": 8}, "ok", float("nan")), "has time nan"),
        (Trial({"a": 1, "b": 8}, "exploded", None), "unknown status"),
    ],
)
def test_export_rejects_bad_records_and_keeps_the_old_file(
    tmp_path: Path, trial: Trial, message: str
) -> None:
    path = tmp_path / "keep.json"
    path.write_text("old contents")
    params = [Parameter.of("a", [1, 2, 3]), Parameter.of("b", [8, 16])]
    with pytest.raises(ValueError, match=message):
        write_cache(
            path,
            device_name="Dev",
            kernel_name="k",
            problem_size=10,
            parameters=params,
            records=[trial],
        )
    assert path.read_text() == "old contents"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]


# ---------------------------------------------------------------------------- Kernel Tuner


def test_kernel_tuner_replays_our_export(pnpoly: RecordedSpace, tmp_path: Path) -> None:
    """Kernel Tuner 1.5 tunes in simulation mode from the exported file, through its own
    process_cache/read_cache and SimulationRunner, and reports the recorded results."""
    kernel_tuner = pytest.importorskip("kernel_tuner")
    np = pytest.importorskip("numpy")
    # A cartesian sub-space (brute force enumerates the product of tune_params) that holds
    # both ok records and runtime failures.
    keep = {
        "between_method": [0, 3],
        "block_size_x": [32, 256, 672, 800, 928, 992],
        "tile_size": [1, 4, 12, 16, 20],
        "use_method": [0, 1, 2],
    }
    params = [Parameter.of(p.name, keep[p.name]) for p in pnpoly.parameters]
    subset = [r for r in pnpoly.records.values() if all(r.config[n] in v for n, v in keep.items())]
    assert len(subset) == 2 * 6 * 5 * 3
    assert {r.status for r in subset} == {"ok", "runtime_error"}
    path = tmp_path / "pnpoly_subset.json"  # Kernel Tuner reads plain .json only
    _export(pnpoly, path, parameters=params, records=subset, problem_size=20000000)

    results, env = kernel_tuner.tune_kernel(
        pnpoly.kernel_name,
        "__global__ void cn_pnpoly(int n) {}",
        20000000,
        [np.int32(0)],
        {p.name: list(p.values) for p in params},
        lang="CUDA",
        cache=str(path),
        simulation_mode=True,
        strategy="brute_force",
        quiet=True,
    )

    assert len(results) == len(subset)
    by_key = {r.key: r for r in subset}
    for result in results:
        record = by_key[",".join(str(result[n]) for n in keep)]
        if record.status == "ok":
            assert "__error__" not in result
            assert result["time"] == record.time_ms
            assert tuple(result["times"]) == record.times_ms
        else:
            assert str(result["__error__"]) == "RuntimeFailedConfig"
    best = min((r for r in subset if r.status == "ok"), key=lambda r: r.time_ms or 0.0)
    assert env["best_config"]["time"] == best.time_ms
    assert env["device_name"] == pnpoly.device_name


def test_a_recording_written_whole_or_in_part_reads_back_with_its_header(tmp_path: Path) -> None:
    rec = load_cache(RECORDED / "pnpoly_RTX_3090.json.gz")
    whole = tmp_path / "whole.json.gz"
    write_recording(whole, rec)
    back = load_cache(whole)
    assert (back.device_name, back.kernel_name, back.problem_size, back.objective) == (
        rec.device_name,
        rec.kernel_name,
        rec.problem_size,
        rec.objective,
    )
    assert {k: (r.status, r.time_ms) for k, r in back.records.items()} == {
        k: (r.status, r.time_ms) for k, r in rec.records.items()
    }
    first = rec.parameters[0]
    kept = Parameter(first.name, first.values[:2], first.kind)
    part = [r for r in rec.records.values() if r.config[first.name] in kept.values]
    path = tmp_path / "part.json.gz"
    write_recording(path, rec, parameters=(kept, *rec.parameters[1:]), records=part)
    narrowed = load_cache(path)
    assert narrowed.parameters[0].values == kept.values
    assert set(narrowed.records) == {r.key for r in part}
