"""The ``ktune`` CLI end to end, on SQLite and PostgreSQL, with the bundled recordings."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.tuner.sources import bundled_recordings

PNPOLY = str(bundled_recordings()["pnpoly_RTX_3090"])
CONV = str(bundled_recordings()["convolution_A4000"])


def ktune(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("strategy", ["random", "optuna"])
def test_tune_writes_budget_distinct_trials_in_order(
    capsys, tmp_path: Path, db_url: str, strategy: str
) -> None:
    out = tmp_path / "x.json"
    code, stdout, _ = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--strategy",
        strategy,
        "--budget",
        "100",
        "--seed",
        "1",
        "--out",
        str(out),
        "--db",
        db_url,
        "--quiet",
    )
    assert code == 0, stdout
    doc = json.loads(out.read_text())
    assert set(doc) >= {"job", "device", "workload", "strategy", "seed", "trials", "best"}
    assert (
        doc["device"] == "NVIDIA GeForce RTX 3090"
        and doc["strategy"] == strategy
        and doc["seed"] == 1
    )
    trials = doc["trials"]
    assert [t["index"] for t in trials] == list(range(100))
    assert len({json.dumps(t["config"], sort_keys=True) for t in trials}) == 100
    assert set(trials[0]) == {
        "index",
        "config",
        "status",
        "time_ms",
        "compile_ms",
        "bench_ms",
        "clock_s",
    }
    clocks = [t["clock_s"] for t in trials]
    assert clocks == sorted(clocks) and clocks[-1] > 0
    ok = [t for t in trials if t["status"] == "ok"]
    assert doc["best"]["time_ms"] == min(t["time_ms"] for t in ok)
    assert doc["best"]["ratio_to_optimum"] >= 1.0
    assert "x the recording's optimum" in stdout and "measurements  100" in stdout


@pytest.mark.parametrize("strategy", ["random", "optuna"])
def test_same_seed_gives_the_same_sequence(
    capsys, tmp_path: Path, db_url: str, strategy: str
) -> None:
    docs = []
    for i in range(2):
        out = tmp_path / f"run{i}.json"
        code, _, _ = ktune(
            capsys,
            "tune",
            "--replay",
            CONV,
            "--strategy",
            strategy,
            "--budget",
            "40",
            "--seed",
            "5",
            "--batch",
            "4",
            "--out",
            str(out),
            "--db",
            db_url,
            "-q",
        )
        assert code == 0
        docs.append(json.loads(out.read_text()))
    assert [t["config"] for t in docs[0]["trials"]] == [t["config"] for t in docs[1]["trials"]]
    assert docs[0]["job"] != docs[1]["job"]


def test_every_trial_lands_in_the_log_and_reads_back(capsys, tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "run.json"
    ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--strategy",
        "random",
        "--budget",
        "25",
        "--seed",
        "2",
        "--out",
        str(out),
        "--db",
        db_url,
        "-q",
    )
    doc = json.loads(out.read_text())
    code, stdout, _ = ktune(capsys, "trials", str(doc["job"]), "--format", "json", "--db", db_url)
    assert code == 0 and json.loads(stdout) == doc["trials"]
    code, stdout, _ = ktune(capsys, "trials", str(doc["job"]), "--format", "csv", "--db", db_url)
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert len(rows) == 25 and rows[0]["block_size_x"] == str(
        doc["trials"][0]["config"]["block_size_x"]
    )
    code, stdout, _ = ktune(capsys, "best", "--format", "json", "--db", db_url)
    best = json.loads(stdout)
    (seq,) = [t["index"] for t in doc["trials"] if t["config"] == doc["best"]["config"]]
    assert best == [
        {
            "workload": doc["workload"],
            "device": doc["device"],
            "time_ms": doc["best"]["time_ms"],
            "config": doc["best"]["config"],
            "job": doc["job"],
            "trial": seq,
            "tuning": False,
        }
    ]
    # the lookup names the same job and position: `ktune trials JOB` finds the trial there
    code, stdout, _ = ktune(
        capsys, "best", "-w", doc["workload"], "-d", doc["device"], "-f", "json", "--db", db_url
    )
    answer = json.loads(stdout)
    assert (answer["job"], answer["trial"], answer["config"]) == (
        doc["job"],
        seq,
        doc["best"]["config"],
    )
    code, stdout, _ = ktune(capsys, "jobs", "--db", db_url)
    assert code == 0 and "random" in stdout and "done" in stdout
    code, stdout, _ = ktune(capsys, "devices", "--db", db_url)
    assert "NVIDIA GeForce RTX 3090" in stdout


def test_time_budget_stops_on_replayed_gpu_time(capsys, tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "t.json"
    code, stdout, _ = ktune(
        capsys,
        "tune",
        "--replay",
        CONV,
        "--strategy",
        "random",
        "--time-budget",
        "30",
        "--seed",
        "1",
        "--out",
        str(out),
        "--db",
        db_url,
        "-q",
    )
    assert code == 0 and "time budget reached" in stdout
    clocks = [t["clock_s"] for t in json.loads(out.read_text())["trials"]]
    assert clocks[-1] >= 30 > clocks[-2]


def test_import_then_export_round_trips_and_reimport_is_refused(
    capsys, tmp_path: Path, db_url: str
) -> None:
    code, stdout, _ = ktune(capsys, "import", PNPOLY, "--db", db_url)
    assert code == 0 and "imported 4092 records" in stdout
    code, stdout, _ = ktune(capsys, "import", PNPOLY, "--db", db_url)
    assert code == 0 and "already in the log" in stdout
    exported = tmp_path / "pnpoly.json"
    code, stdout, _ = ktune(
        capsys,
        "export",
        "-w",
        "cn_pnpoly/20000000/-",
        "-d",
        "NVIDIA GeForce RTX 3090",
        "-o",
        str(exported),
        "--db",
        db_url,
    )
    assert code == 0, stdout
    original = json.loads(gzip.decompress(Path(PNPOLY).read_bytes()))["cache"]
    again = json.loads(exported.read_text())["cache"]
    assert set(original) == set(again)
    assert all(again[k]["time"] == original[k]["time"] for k in original)


def test_strategies_and_spaces_list_what_is_available(capsys, db_url: str) -> None:
    code, stdout, _ = ktune(capsys, "strategies")
    assert code == 0 and "optuna" in stdout and "random" in stdout
    code, stdout, _ = ktune(capsys, "spaces", "--db", db_url)
    assert code == 0 and "convolution_A4000" in stdout and "NVIDIA RTX A4000" in stdout


# -- bad input: one line, non-zero exit, nothing written -------------------------------------


def _bad_files(tmp: Path) -> dict[str, Path]:
    truncated = tmp / "truncated.json.gz"
    truncated.write_bytes(Path(PNPOLY).read_bytes()[:5000])
    notjson = tmp / "notjson.json"
    notjson.write_text("this is not json")
    doc = json.loads(gzip.decompress(Path(PNPOLY).read_bytes()))
    doc["tune_params"]["block_size_x"] = [32, 64]  # records use values the header does not list
    mismatch = tmp / "mismatch.json"
    mismatch.write_text(json.dumps(doc))
    return {
        "missing": tmp / "nope.json.gz",
        "truncated": truncated,
        "notjson": notjson,
        "mismatch": mismatch,
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "truncated",
        "notjson",
        "mismatch",
        "strategy",
        "constraint",
        "budget0",
        "budget-1",
        "timebudget0",
        "both",
        "neither",
        "batch0",
    ],
)
def test_bad_input_gives_one_line_and_writes_nothing(capsys, tmp_path: Path, case: str) -> None:
    files = _bad_files(tmp_path)
    db_file = tmp_path / "log.db"
    out = tmp_path / "out.json"
    common = ["--db", f"sqlite:///{db_file}", "--out", str(out), "-q"]
    args = {
        "strategy": ["--replay", PNPOLY, "--strategy", "simulated_anealing"],
        "constraint": ["--replay", PNPOLY, "--constraint", "block_size_x * <= 3"],
        "budget0": ["--replay", PNPOLY, "--budget", "0"],
        "budget-1": ["--replay", PNPOLY, "--budget", "-1"],
        "timebudget0": ["--replay", PNPOLY, "--time-budget", "0"],
        "both": ["--replay", PNPOLY, "--resume", "1"],
        "neither": [],
        "batch0": ["--replay", PNPOLY, "--batch", "0"],
    }.get(case, ["--replay", str(files.get(case))])
    code, _, stderr = ktune(capsys, "tune", *args, *common)
    assert code != 0
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    assert not db_file.exists() and not out.exists()


def test_unreachable_database_is_one_line(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, _, stderr = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--budget",
        "5",
        "--out",
        str(out),
        "-q",
        "--db",
        "postgresql://ktune:secret@127.0.0.1:1/nowhere",
    )
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and "secret" not in stderr
    assert not out.exists()


def test_constraint_error_names_the_expression(capsys, tmp_path: Path) -> None:
    _, _, stderr = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--constraint",
        "block_size_x < bogus",
        "--db",
        f"sqlite:///{tmp_path}/l.db",
    )
    assert "block_size_x < bogus" in stderr and "bogus" in stderr


def test_extra_constraint_restricts_what_is_measured(capsys, tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "c.json"
    code, _, _ = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--constraint",
        "block_size_x <= 128 and tile_size in [1, 2]",
        "--strategy",
        "random",
        "--budget",
        "30",
        "--out",
        str(out),
        "--db",
        db_url,
        "-q",
    )
    assert code == 0
    configs = [t["config"] for t in json.loads(out.read_text())["trials"]]
    assert all(c["block_size_x"] <= 128 and c["tile_size"] in (1, 2) for c in configs)


def test_resume_of_unknown_job_is_one_line(capsys, tmp_path: Path) -> None:
    code, _, stderr = ktune(capsys, "tune", "--resume", "999", "--db", f"sqlite:///{tmp_path}/l.db")
    assert code != 0 and stderr.strip().startswith("error: no job 999")


def test_tune_without_a_strategy_runs_the_default_auto(capsys, tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "auto.json"
    code, stdout, _ = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--budget",
        "24",
        "--seed",
        "2",
        "--out",
        str(out),
        "--db",
        db_url,
        "-q",
    )
    assert code == 0, stdout
    doc = json.loads(out.read_text())
    assert doc["strategy"] == "auto" and len(doc["trials"]) == 24


def test_a_recording_that_names_no_device_is_tuned_and_imported(
    capsys, tmp_path: Path, db_url: str
) -> None:
    """An empty ``device_name`` (as Kernel Tuner writes it for some AMD GPUs) used to stop
    ``tune`` and ``import`` with 'a device needs a name'."""
    with gzip.open(PNPOLY, "rt") as fh:
        doc = json.load(fh)
    doc["device_name"] = ""
    unnamed = tmp_path / "unnamed.json"
    unnamed.write_text(json.dumps(doc))
    out = tmp_path / "x.json"
    code, stdout, stderr = ktune(
        capsys,
        "tune",
        "--replay",
        str(unnamed),
        "--budget",
        "12",
        "--seed",
        "1",
        "--out",
        str(out),
        "--db",
        db_url,
        "--quiet",
    )
    assert code == 0, stderr
    device = json.loads(out.read_text())["device"]
    assert device.startswith("unknown GPU (recording ")
    code, _, stderr = ktune(capsys, "import", str(unnamed), "--db", db_url)
    assert code == 0, stderr
    code, stdout, _ = ktune(capsys, "devices", "--db", db_url)
    assert code == 0 and device in stdout


def test_the_summary_numbers_the_best_trial_as_ktune_trials_does(
    capsys, tmp_path: Path, db_url: str
) -> None:
    code, stdout, _ = ktune(
        capsys, "tune", "--replay", PNPOLY, "--budget", "30", "--seed", "2", "-q", "--db", db_url
    )
    assert code == 0, stdout
    job = re.search(r"^job (\d+) done", stdout, re.M)
    best = re.search(r"best +([\d.]+ ms) at trial #(\d+)\b", stdout)
    assert job is not None and best is not None, stdout
    code, listed, _ = ktune(capsys, "trials", job[1], "--format", "json", "--db", db_url)
    ok = [t for t in json.loads(listed) if t["status"] == "ok"]
    fastest = min(ok, key=lambda t: (t["time_ms"], t["index"]))
    assert int(best[2]) == fastest["index"]  # the "#" column of `ktune trials`
    code, table, _ = ktune(capsys, "trials", job[1], "--db", db_url)
    assert re.search(rf"^\W*{best[2]}\W+ok\W+{re.escape(best[1])}", table, re.M), table


def test_a_tune_without_a_budget_says_it_measures_every_config(
    capsys, tmp_path: Path, db_url: str
) -> None:
    args = ["tune", "--replay", PNPOLY, "-c", "block_size_x <= 64", "--seed", "1"]
    code, _, stderr = ktune(capsys, *args, "--time-budget", "1", "--db", db_url)
    lines = [line for line in stderr.splitlines() if line.startswith("no --budget")]
    assert code == 0 and len(lines) == 1, stderr
    assert re.fullmatch(
        r"no --budget: measuring until all \d+ configs are measured or another limit stops it",
        lines[0],
    )
    code, _, stderr = ktune(capsys, *args, "--budget", "2", "--db", db_url)
    assert code == 0 and "no --budget" not in stderr
