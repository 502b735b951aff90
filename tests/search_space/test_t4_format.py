"""T4 results files: read with their T1 spec and GPU, they give what the Kernel Tuner cache of
the same measurements gives, and they import into the log the same way."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.search_space.formats import FormatError, RecordedSpace, load_cache, load_t1
from ktune.search_space.formats.t4 import is_t4_file, load_t4
from ktune.testing.recordings import RECORDED
from ktune.tuner.importing import import_recording

DEVICE = "NVIDIA RTX A4000"
SPEC = RECORDED / "convolution_t1.json"
INVALIDITY = {
    "ok": "correct",
    "compile_error": "compile",
    "runtime_error": "runtime",
    "invalid": "constraints",
}


@pytest.fixture(scope="module")
def cache() -> RecordedSpace:
    return load_cache(RECORDED / "convolution_A4000.json.gz")


@pytest.fixture(scope="module")
def doc(cache: RecordedSpace) -> dict[str, Any]:
    return t4_document(cache)


def t4_document(
    rec: RecordedSpace, ms_per_unit: float = 1.0, unit: str = "miliseconds"
) -> dict[str, Any]:
    """The T4 document Kernel Tuner's ``store_output_file`` writes for these measurements."""
    results = []
    for r in rec.records.values():
        value: Any = (
            r.time_ms / ms_per_unit
            if r.status == "ok" and r.time_ms is not None
            else "RuntimeFailedConfig"
        )
        times: dict[str, Any] = {
            "compilation": r.compile_ms / ms_per_unit,
            "framework": r.framework_ms / ms_per_unit,
            "search_algorithm": 0,
            "validation": 0,
        }
        if r.status == "ok":
            times["runtimes"] = [t / ms_per_unit for t in r.times_ms]
        results.append(
            {
                "timestamp": "2023-12-22 09:54:05+00:00",
                "configuration": dict(r.config),
                "times": times,
                "invalidity": INVALIDITY[r.status],
                "correctness": int(r.status == "ok"),
                "measurements": [{"name": "time", "value": value, "unit": ""}],
                "objectives": ["time"],
            }
        )
    return {"metadata": {"timeunit": unit}, "schema_version": "1.0.0", "results": results}


def write(path: Path, doc: Any) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_t4_results_read_as_the_cache_of_the_same_measurements(
    tmp_path: Path, cache: RecordedSpace
) -> None:
    rec = load_t4(write(tmp_path / "a4000_T4.json.gz", t4_document(cache)), load_t1(SPEC), DEVICE)
    assert rec.device_name == DEVICE and rec.workload().key == cache.workload().key
    assert rec.records.keys() == cache.records.keys()
    for key, want in cache.records.items():
        got = rec.records[key]
        assert (got.config, got.status, got.time_ms, got.times_ms) == (
            want.config,
            want.status,
            want.time_ms,
            want.times_ms,
        )
        assert got.compile_ms == pytest.approx(
            want.compile_ms
        ) and got.framework_ms == pytest.approx(want.framework_ms)
        assert got.bench_ms == pytest.approx(
            sum(want.times_ms)
        )  # T4 keeps the runs, not the benchmark's wall time
    assert (
        rec.space.to_dict()["parameters"][0]["values"]
        == cache.space.to_dict()["parameters"][0]["values"]
    )
    assert (
        len(rec.space) == len(cache.space) and rec.optimum is not None and cache.optimum is not None
    )
    assert rec.optimum.key == cache.optimum.key
    assert is_t4_file(tmp_path / "a4000_T4.json.gz") and not is_t4_file(
        RECORDED / "convolution_A4000.json.gz"
    )


@pytest.mark.parametrize(
    ("unit", "ms_per_unit"), [("seconds", 1e3), ("microseconds", 1e-3), ("ms", 1.0)]
)
def test_times_are_read_in_the_files_unit(
    tmp_path: Path, cache: RecordedSpace, unit: str, ms_per_unit: float
) -> None:
    rec = load_t4(
        write(tmp_path / "t4.json.gz", t4_document(cache, ms_per_unit, unit)), load_t1(SPEC), DEVICE
    )
    assert rec.optimum is not None and cache.optimum is not None
    assert rec.optimum.time_ms == pytest.approx(cache.optimum.time_ms)
    assert rec.optimum.compile_ms == pytest.approx(cache.optimum.compile_ms)


def test_imported_t4_joins_the_workload_and_is_imported_once_per_gpu(
    tmp_path: Path, cache: RecordedSpace
) -> None:
    path = write(tmp_path / "t4.json.gz", t4_document(cache))
    spec = load_t1(SPEC)
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as tlog:
        first = import_recording(tlog, load_t4(path, spec, DEVICE))
        again = import_recording(tlog, load_t4(path, spec, DEVICE))
        other = import_recording(tlog, load_t4(path, spec, "NVIDIA RTX A6000"))
        kt = import_recording(tlog, cache)
        trials = {t.config_key: (t.status, t.time_ms) for t in tlog.job_trials(first.job.id)}
        assert trials == {t.config_key: (t.status, t.time_ms) for t in tlog.job_trials(kt.job.id)}
    assert (first.n_records, first.n_ok, again.already, again.job.id) == (
        len(cache.records),
        kt.n_ok,
        True,
        first.job.id,
    )
    assert not other.already and other.job.device_name == "NVIDIA RTX A6000"
    assert first.job.workload_key == kt.job.workload_key


def _edit(doc: dict[str, Any], change: str) -> Any:
    doc = copy.deepcopy(doc)
    ok = next(r for r in doc["results"] if r["invalidity"] == "correct")
    if change == "version":
        doc["schema_version"] = "2.0.0"
    elif change == "unit":
        doc["metadata"]["timeunit"] = "fortnights"
    elif change == "invalidity":
        ok["invalidity"] = "broken"
    elif change == "value":
        ok["configuration"]["block_size_x"] = 17
    elif change == "extra":
        ok["configuration"]["unroll"] = 2
    elif change == "missing":
        del ok["configuration"]["tile_size_x"]
    elif change == "no_time":
        ok["measurements"] = [{"name": "GFLOP/s", "value": 12.0}]
    elif change == "negative":
        ok["measurements"][0]["value"] = -1.0
    elif change == "runtimes":
        ok["times"]["runtimes"] = ["fast"]
    elif change == "repeat":
        doc["results"].append(copy.deepcopy(ok))
    elif change == "empty":
        doc["results"] = []
    elif change == "constraints":
        ok["configuration"]["block_size_x"], ok["configuration"]["block_size_y"] = (
            256,
            16,
        )  # 4096 threads
    elif change == "cache":
        return json.loads(gzip.decompress((RECORDED / "convolution_A4000.json.gz").read_bytes()))
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("version", "schema_version '2.0.0' is not 1.x"),
        ("unit", "metadata.timeunit 'fortnights' is not a unit of time"),
        ("invalidity", "invalidity 'broken' is not one of correct, compile"),
        ("value", "block_size_x=17 is not among the values of block_size_x in the T1 spec"),
        ("extra", "'unroll' is not a parameter of the T1 spec"),
        ("missing", "configuration lacks parameter 'tile_size_x'"),
        ("no_time", "is correct but has no 'time' measurement"),
        ("negative", "time -1.0 is not a positive duration"),
        ("runtimes", "times.runtimes must be a list of numbers"),
        ("repeat", "repeats the configuration of result #"),
        ("empty", "results must be a non-empty list"),
        ("constraints", "outside the T1 spec's space"),
        ("cache", "not a T4 results file"),
    ],
)
def test_bad_t4_files_are_one_line_errors(
    tmp_path: Path, doc: dict[str, Any], change: str, message: str
) -> None:
    path = write(tmp_path / "bad_T4.json.gz", _edit(doc, change))
    with pytest.raises(FormatError) as info:
        load_t4(path, load_t1(SPEC), DEVICE)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(str(path)), text


def test_ktune_import_of_t4_needs_its_spec_and_gpu(
    tmp_path: Path, cache: RecordedSpace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write(tmp_path / "a4000_T4.json.gz", t4_document(cache)))
    db = ["--db", f"sqlite:///{tmp_path / 'log.db'}"]

    def ktune(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        got = capsys.readouterr()
        return code, got.out, got.err

    cases = [
        (
            ["import", path],
            (
                "T4 results name neither their space nor their GPU: "
                "give --spec T1.json and --device NAME"
            ),
        ),
        (
            ["import", path, "--spec", str(SPEC)],
            "a T4 results file needs both --spec T1.json and --device NAME",
        ),
        (
            [
                "import",
                str(RECORDED / "convolution_A4000.json.gz"),
                "--spec",
                str(SPEC),
                "-d",
                DEVICE,
            ],
            "--spec is for T4 results files",
        ),
        (["import", path, "--spec", str(SPEC), "-d", " "], "--device must not be empty"),
        (
            ["import", path, "--spec", str(RECORDED / "dedispersion_t1.json"), "-d", DEVICE],
            "is not a parameter of the T1 spec",
        ),
    ]
    for args, message in cases:
        code, _, err = ktune(*args, *db)
        assert code == 2 and err.count("\n") == 1 and message in err, (args, err)
    assert (
        not (tmp_path / "log.db").exists() or "import" not in ktune("jobs", *db)[1]
    )  # nothing was written
    code, out, _ = ktune("import", path, "--spec", str(SPEC), "--device", DEVICE, *db)
    assert code == 0 and f"imported {len(cache.records)} records" in out and DEVICE in out
    code, out, _ = ktune("best", "-w", cache.workload().key, "-d", DEVICE, "--format", "json", *db)
    assert cache.optimum is not None and json.loads(out)["config"] == dict(cache.optimum.config)


def test_export_as_t4_round_trips_and_meets_the_t4_schema(
    tmp_path: Path, cache: RecordedSpace, capsys: pytest.CaptureFixture[str]
) -> None:
    """What ``ktune export --format t4`` writes is valid T4 (Kernel Tuner's copy of the schema)
    and reads back, with the T1 spec, as the measurements it came from."""
    db = ["--db", f"sqlite:///{tmp_path / 'log.db'}"]
    assert main(["import", str(RECORDED / "convolution_A4000.json.gz"), *db]) == 0
    out = tmp_path / "out" / "a4000_T4.json.gz"
    assert (
        main(
            [
                "export",
                "-w",
                cache.workload().key,
                "-d",
                DEVICE,
                "-o",
                str(out),
                "--format",
                "t4",
                *db,
            ]
        )
        == 0
    )
    assert f"wrote {len(cache.records)} records" in capsys.readouterr().out
    rec = load_t4(out, load_t1(SPEC), DEVICE)
    assert {k: (r.status, r.time_ms, r.times_ms, r.compile_ms) for k, r in rec.records.items()} == {
        k: (r.status, r.time_ms, r.times_ms, r.compile_ms) for k, r in cache.records.items()
    }
    jsonschema = pytest.importorskip("jsonschema")
    spec = importlib.util.find_spec("kernel_tuner")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("Kernel Tuner (the bench extra) ships the T4 schema")
    schema = (
        Path(spec.submodule_search_locations[0]) / "schema" / "T4" / "1.0.0" / "results-schema.json"
    )
    jsonschema.validate(
        json.loads(gzip.decompress(out.read_bytes())), json.loads(schema.read_text())
    )


def test_timeouts_and_wrong_results_survive_a_t4_round_trip(tmp_path: Path) -> None:
    """Unlike a Kernel Tuner cache, T4 tells a timeout and a wrong result from a crash."""
    from ktune.search_space.formats.t4 import write_t4

    spec = load_t1(SPEC)
    configs = spec.space.configs([0, 1, 2, 3])
    statuses = ["ok", "timeout", "wrong_result", "compile_error"]

    class Row:
        def __init__(self, config: dict[str, Any], status: str) -> None:
            self.config, self.status = config, status
            self.time_ms = 2.5 if status == "ok" else None
            self.times_ms, self.compile_ms, self.bench_ms, self.framework_ms = (
                (2.5,),
                10.0,
                3.0,
                0.0,
            )

    path = tmp_path / "t4.json"
    assert (
        write_t4(
            path,
            parameters=spec.space.parameters,
            records=[Row(c, s) for c, s in zip(configs, statuses)],
        )
        == 4
    )
    rec = load_t4(path, spec, DEVICE)
    assert [r.status for r in rec.records.values()] == statuses


def test_a_cache_that_names_no_gpu_is_imported_under_the_name_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kernel Tuner writes an empty device name where the driver gave none (AMD MI250X caches
    of the Benchmark Hub); --device names the GPU, so its trials serve transfer and lookups."""
    from ktune.testing.recordings import kt_cache, write_kt_cache

    cache_file = write_kt_cache(
        tmp_path / "mi250x.json",
        kt_cache({"block_size_x": [32, 64]}, lambda c: c["block_size_x"] / 32, device=""),
    )
    db = ["--db", f"sqlite:///{tmp_path / 'log.db'}"]
    assert main(["import", str(cache_file), *db]) == 0
    assert "on unknown GPU (recording" in capsys.readouterr().out
    assert main(["import", str(cache_file), "--device", "AMD Instinct MI250X", *db]) == 0
    assert (
        "on AMD Instinct MI250X as job 2" in capsys.readouterr().out
    )  # another recording: named otherwise
    assert main(["import", str(cache_file), "--device", "AMD Instinct MI250X", *db]) == 0
    assert "already in the log as job 2" in capsys.readouterr().out
    assert (
        main(["best", "-w", "kern/100/-", "-d", "AMD Instinct MI250X", "--format", "json", *db])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["config"] == {"block_size_x": 32}
