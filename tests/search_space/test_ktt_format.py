"""KTT output files: read alone, they give what the Kernel Tuner cache of the same measurements
gives, and ``ktune import`` takes them like a cache."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ktune.cli.app import main
from ktune.search_space.formats import (
    FormatError,
    RecordedSpace,
    TooLarge,
    load_cache,
    load_recording,
)
from ktune.search_space.formats.ktt import is_ktt_file, load_ktt
from ktune.testing.ktt import ktt_document, write_json
from ktune.testing.recordings import RECORDED


@pytest.fixture(scope="module")
def cache() -> RecordedSpace:
    return load_cache(RECORDED / "convolution_A4000.json.gz")


@pytest.fixture(scope="module")
def doc(cache: RecordedSpace) -> dict[str, Any]:
    return ktt_document(cache)


def _outcomes(records: Any) -> dict[str, tuple[str, float | None]]:
    """Status and time (to a nanosecond: units are converted) of each record."""
    return {
        k: (r.status, None if r.time_ms is None else round(r.time_ms, 6))
        for k, r in records.items()
    }


def test_ktt_output_reads_as_the_cache_of_the_same_measurements(
    tmp_path: Path, cache: RecordedSpace, doc: dict[str, Any]
) -> None:
    rec = load_ktt(write_json(tmp_path / "KTConvolutionOutput_A4000.json.gz", doc))
    kept = {k: r for k, r in cache.records.items() if r.status != "invalid"}
    assert _outcomes(rec.records) == _outcomes(kept)
    assert (rec.device_name, rec.kernel_name, rec.objective) == (
        cache.device_name,
        cache.kernel_name,
        "time",
    )
    assert len(rec.space) == len(cache.space)
    assert {rec.space.key(c) for c in rec.space.configs(range(len(rec.space)))} == {
        cache.space.key(c) for c in cache.space.configs(range(len(cache.space)))
    }
    assert rec.optimum is not None and cache.optimum is not None
    assert rec.optimum.key == cache.optimum.key
    # values ascending, whatever order the results come in
    assert all(list(p.values) == sorted(p.values) for p in rec.parameters)
    ok = next(r for r in rec.records.values() if r.status == "ok")
    # the overhead less data movement, validation and the searcher is the compile time
    assert ok.bench_ms == ok.time_ms and ok.framework_ms == pytest.approx(0.010)
    assert ok.compile_ms == pytest.approx(cache.records[ok.key].compile_ms)
    assert is_ktt_file(tmp_path / "KTConvolutionOutput_A4000.json.gz")
    assert not is_ktt_file(RECORDED / "convolution_A4000.json.gz")


def test_problem_size_from_constants_or_given(tmp_path: Path, doc: dict[str, Any]) -> None:
    path = write_json(tmp_path / "ktt.json", doc)
    constants = [
        r["Value"]
        for r in doc["Results"][0]["Configuration"]
        if len(
            {
                c["Value"]
                for res in doc["Results"]
                for c in res["Configuration"]
                if c["Name"] == r["Name"]
            }
        )
        == 1
    ]
    assert load_ktt(path).problem_size == tuple(constants)
    assert (
        load_ktt(path, problem_size=(4096, 4096))
        .workload()
        .key.startswith(f"{doc['Results'][0]['KernelName']}/4096x4096")
    )


@pytest.mark.parametrize(("unit", "per"), [("Milliseconds", 1000.0), ("Nanoseconds", 1e-3)])
def test_times_are_read_in_the_files_unit(
    tmp_path: Path, cache: RecordedSpace, unit: str, per: float
) -> None:
    rec = load_ktt(write_json(tmp_path / "ktt.json", ktt_document(cache, per, unit)))
    assert cache.optimum is not None and rec.optimum is not None
    assert rec.optimum.time_ms == pytest.approx(cache.optimum.time_ms)


def _edit(doc: dict[str, Any], change: str) -> Any:
    doc = copy.deepcopy(doc)
    ok = next(r for r in doc["Results"] if r["Status"] == "Ok")
    if change == "unit":
        doc["Metadata"]["TimeUnit"] = "Fortnights"
    elif change == "status":
        ok["Status"] = "Broken"
    elif change == "names":
        ok["Configuration"] = ok["Configuration"][1:]
    elif change == "twice":
        ok["Configuration"].append(copy.deepcopy(ok["Configuration"][0]))
    elif change == "value":
        ok["Configuration"][0]["Value"] = [1, 2]
    elif change == "negative":
        ok["TotalDuration"] = -5.0
    elif change == "repeat":
        doc["Results"].append(copy.deepcopy(ok))
    elif change == "kernels":
        ok["KernelName"] = "other"
    elif change == "empty":
        doc["Results"] = []
    elif change == "cache":
        return json.loads(gzip.decompress((RECORDED / "convolution_A4000.json.gz").read_bytes()))
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("unit", "Metadata.TimeUnit 'Fortnights' is not a unit of time"),
        ("status", "Status 'Broken' is not KTT's"),
        ("names", "has parameters"),
        ("twice", "twice"),
        ("value", "is not a number or a string"),
        ("negative", "TotalDuration -5.0 is not a duration"),
        ("repeat", "repeats the configuration"),
        ("kernels", "every result must name the same kernel"),
        ("empty", "Results must be a non-empty list"),
        ("cache", "not KTT output"),
    ],
)
def test_bad_ktt_files_are_one_line_errors(
    tmp_path: Path, doc: dict[str, Any], change: str, message: str
) -> None:
    path = write_json(tmp_path / "bad_ktt.json.gz", _edit(doc, change))
    with pytest.raises(FormatError) as info:
        load_ktt(path)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(str(path)), text


def test_ktune_import_takes_ktt_output_and_export_gives_its_cache(
    tmp_path: Path, doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write_json(tmp_path / "KTConvolutionOutput_A4000.json.gz", doc))
    db = ["--db", f"sqlite:///{tmp_path / 'log.db'}"]

    def ktune(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        got = capsys.readouterr()
        return code, got.out, got.err

    rec = load_ktt(path)
    code, out, _ = ktune("import", path, *db)
    assert code == 0 and f"imported {len(rec.records)} records" in out, out
    code, out, _ = ktune("import", path, *db)
    assert code == 0 and "already in the log" in out
    code, out, _ = ktune("import", path, "--device", "NVIDIA RTX A6000", *db)
    assert code == 0 and "on NVIDIA RTX A6000" in out
    exported = tmp_path / "exported.json.gz"
    key = rec.workload().key
    code, out, err = ktune("export", "-w", key, "-d", rec.device_name, "-o", str(exported), *db)
    assert code == 0, err
    again = load_cache(exported)
    assert _outcomes(again.records) == _outcomes(rec.records)
    broken = write_json(tmp_path / "broken_ktt.json", _edit(doc, "status"))
    code, _, err = ktune("import", str(broken), *db)
    assert code == 2 and err.count("\n") == 1 and "is not KTT's" in err, err


def test_ktune_import_names_a_ktt_files_problem_size_with_shape(
    tmp_path: Path, doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """KTT records no problem size: ``--shape`` gives the one the measurements were taken at;
    it is refused, in one line, for a file that is not KTT output and for a bad shape."""
    path = str(write_json(tmp_path / "KTConvolutionOutput_A4000.json.gz", doc))
    db = ["--db", f"sqlite:///{tmp_path / 'log.db'}"]
    kernel = doc["Results"][0]["KernelName"]
    code = main(["import", path, "--shape", "4096x4096", *db])
    out = capsys.readouterr().out
    assert code == 0 and f"of {kernel}/4096x4096" in out, out
    # the same file again, at another size, is the job already in the log, which says its shape
    code = main(["import", path, "--shape", "512x512", *db])
    out = capsys.readouterr().out
    assert code == 0 and "already in the log as job 1" in out and "/4096x4096" in out, out
    cache = str(RECORDED / "convolution_A4000.json.gz")
    for args, message in (
        ([cache, "--shape", "4096x4096"], "--shape is for KTT output files; convolution_A4000"),
        ([path, "--shape", "4096xfour"], "--shape: shape '4096xfour' is not like 4096x4096"),
        ([path, "--shape", "0x4096"], "--shape: sizes must be positive"),
        ([path, "--shape", "64", "--spec", path], "--spec is for T4 results files"),
    ):
        code = main(["import", *args, *db])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_ktt_file_replays_as_its_cache_does(
    tmp_path: Path, doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "KTConvolutionOutput_A4000.json", doc)
    assert load_recording(path).digest == load_ktt(path).digest
    with pytest.raises(FormatError, match="missing header field"):
        load_recording(write_json(tmp_path / "other.json", {"Results": []}))  # the cache's error
    with pytest.raises(TooLarge):
        load_recording(path, max_bytes=1000)
    out = tmp_path / "run.json"
    args = ["tune", "--replay", str(path), "--budget", "12", "--seed", "3", "-q", "--out", str(out)]
    code = main([*args, "--db", f"sqlite:///{tmp_path / 'log.db'}"])
    assert code == 0, capsys.readouterr().err
    trials = json.loads(out.read_text())["trials"]
    rec = load_ktt(path)
    assert len(trials) == 12
    for t in trials:  # each replayed measurement is the KTT file's
        r = rec.lookup(t["config"])
        assert r is not None and t["status"] == r.status
        assert t["time_ms"] == (pytest.approx(r.time_ms) if r.time_ms is not None else None)
