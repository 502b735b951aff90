"""The service's commands: ``ktune token``, ``ktune worker``, ``ktune serve`` errors, and
``ktune best`` for build systems (JSON, shell variables, a C header that compiles and agrees)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import ktune
from ktune.cli.app import main
from ktune.db import TrialIn, TuningLog
from ktune.search_space.workload import Workload
from ktune.testing.recordings import CONV
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job
from ktune.tuner.sources import ReplaySource, bundled_recordings

A100 = "NVIDIA A100-PCIE-40GB"
SHAPES = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (4096, 4096, 4096),
    (1024, 4096, 1024),
    (8192, 256, 2048),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def matmuls(db_url: str) -> dict[tuple[int, ...], dict[str, Any]]:
    """Tuned float32 matmuls on an A100, with int, float, bool and string parameters."""
    configs: dict[tuple[int, ...], dict[str, Any]] = {}
    with TuningLog.open(db_url) as tlog:
        d = tlog.get_or_create_device(A100)
        for i, shape in enumerate(SHAPES):
            wl = Workload("matmul", shape, "float32")
            w = tlog.get_or_create_workload(wl.key, wl.operator, wl.shape, wl.dtype)
            config = {
                "tile_m": 16 * (i + 1),
                "split-k": i % 2 == 0,
                "ratio": 0.5 + i,
                "layout": f'row"{i}',
            }
            tlog.add_trials(
                None,
                w.id,
                d.id,
                "import",
                [
                    TrialIn(
                        config=config, config_key=json.dumps(config), status="ok", time_ms=1.0 + i
                    )
                ],
            )
            configs[shape] = config
    return configs


def test_token_create_list_revoke(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    code, out, err = run(capsys, "token", "create", "ci", "--db", db_url)
    token = out.strip()
    assert code == 0 and token.startswith("ktune_") and "shown only now" in err
    with TuningLog.open(db_url) as tlog:
        record = tlog.verify_token(token)
        assert record is not None and record.name == "ci"
    code, out, _ = run(capsys, "token", "list", "--db", db_url)
    assert code == 0 and record.token_id in out and token.split("_", 2)[2] not in out
    assert run(capsys, "token", "revoke", record.token_id, "--db", db_url)[0] == 0
    code, _, err = run(capsys, "token", "revoke", record.token_id, "--db", db_url)
    assert code == 1 and err.strip() == f"error: no live token with id or name {record.token_id!r}"
    with TuningLog.open(db_url) as tlog:
        assert tlog.verify_token(token) is None


def test_worker_drains_the_queue(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        source = ReplaySource.open(bundled_recordings()[CONV])
        ids = [
            create_job(tlog, JobRequest(source, "random", Budget(max_trials=8), seed=s)).id
            for s in (1, 2)
        ]
    code, out, err = run(capsys, "worker", "--drain", "-j", "2", "--poll", "0.05", "--db", db_url)
    assert code == 0 and "until the queue is empty" in out and "stopped" in out
    for job_id in ids:  # the log says when each job starts and ends
        assert f"runs job {job_id}" in err and f"job {job_id} ended: budget" in err
    with TuningLog.open(db_url) as tlog:
        assert [tlog.get_job(i).state for i in ids] == ["done", "done"]  # type: ignore[union-attr]
    code, _, err = run(capsys, "worker", "--concurrency", "0", "--db", db_url)
    assert code == 2 and err.strip() == "error: --concurrency must be >= 1, got 0"
    # A worker that runs only cupy jobs leaves replay jobs alone.
    with TuningLog.open(db_url) as tlog:
        job = create_job(tlog, JobRequest(source, "random", Budget(max_trials=3)))
    assert run(capsys, "worker", "--drain", "--backend", "cupy", "--db", db_url)[0] == 0
    with TuningLog.open(db_url) as tlog:
        assert tlog.get_job(job.id).state == "queued"  # type: ignore[union-attr]


def test_serve_refuses_bad_settings_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTUNE_API_TOKENS", "changeme")
    code, _, err = run(capsys, "serve", "--port", "0")
    assert (
        code == 2 and err.count("\n") == 1 and "KTUNE_API_TOKENS" in err and "changeme" not in err
    )
    monkeypatch.delenv("KTUNE_API_TOKENS")
    code, _, err = run(capsys, "serve", "--port", "70000")
    assert code == 2 and err.strip() == "error: --port must be 0..65535, got 70000"


def test_best_json_and_env_give_the_lookup(
    capsys: pytest.CaptureFixture[str], db_url: str, matmuls: Any
) -> None:
    args = [
        "best",
        "--operator",
        "matmul",
        "--shape",
        "2000x2000x2000",
        "--dtype",
        "float32",
        "--device",
        A100,
        "--db",
        db_url,
    ]
    code, out, _ = run(capsys, *args, "--format", "json")
    answer = ktune.lookup("matmul", (2000, 2000, 2000), dtype="float32", device=A100, db=db_url)
    assert code == 0 and answer is not None and json.loads(out) == answer.to_dict()
    code, out, _ = run(capsys, *args, "--format", "env")
    env = dict(line.split("=", 1) for line in out.splitlines())
    assert (
        code == 0
        and env["KTUNE_TIER"] == "nearest_shape"
        and env["KTUNE_WORKLOAD"] == answer.workload
    )
    assert shlex.split(env["KTUNE_DEVICE"]) == [A100]
    assert int(env["KTUNE_TILE_M"]) == answer.config["tile_m"] and env["KTUNE_SPLIT_K"] in (
        "0",
        "1",
    )
    assert shlex.split(env["KTUNE_LAYOUT"]) == [answer.config["layout"]]
    assert answer.job is None and (env["KTUNE_JOB"], env["KTUNE_TRIAL"], env["KTUNE_TUNING"]) == (
        "''",
        "''",
        "0",
    )
    code, _, err = run(capsys, *args[:-2], "--db", db_url, "--format", "env", "--exact")
    assert code == 1 and "no tuned config" in err
    code, _, err = run(
        capsys,
        "best",
        "--operator",
        "matmul",
        "--shape",
        "64x64",
        "--dtype",
        "float32",
        "--device",
        A100,
        "--db",
        db_url,
        "--format",
        "json",
    )
    # ktune's matmul builds the workload, as `ktune tune --op matmul` does: it names the shape
    assert (
        code == 2
        and err.strip() == "error: --shape: matmul: shape needs 3 dimensions (MxNxK), got 2"
    )
    code, _, err = run(
        capsys,
        "best",
        "--format",
        "env",
        "--operator",
        "matmul",
        "--shape",
        "64x64x64",
        "--db",
        db_url,
    )
    assert code == 2 and "need --device" in err


def test_env_says_while_the_answer_is_still_being_tuned() -> None:
    """A Makefile that includes the env answer can tell a final answer from a provisional one."""
    from ktune import Answer
    from ktune.db.records import LookupQuery
    from ktune.tuner.lookup import render_env

    query = LookupQuery("matmul/64x64x64/float32", "matmul", (64, 64, 64), "float32", "", A100)
    answer = Answer(
        query,
        "cost_model",
        query.workload_key,
        A100,
        {"tile_m": 64, "tuning": 1},
        None,
        None,
        0.0,
        None,
        tuning=True,
    )
    env = {
        k: shlex.split(v)[0] if v else ""
        for k, v in (line.split("=", 1) for line in render_env(answer).splitlines())
    }
    assert (env["KTUNE_TUNING"], env["KTUNE_JOB"], env["KTUNE_TRIAL"], env["KTUNE_TIME_MS"]) == (
        "1",
        "",
        "",
        "",
    )
    assert (
        env["KTUNE_TUNING_"] == "1" and env["KTUNE_TILE_M"] == "64"
    )  # a knob named like the answer's own variable


QUERIES = [
    (512, 512, 512),
    (700, 700, 700),
    (2048, 2048, 2048),
    (1024, 3000, 1024),
    (10000, 300, 1500),
    (1, 1, 1),
    (100000, 100000, 100000),
]


@pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc and g++"
)
def test_header_compiles_and_its_dispatch_agrees_with_the_lookup(
    capsys: pytest.CaptureFixture[str], db_url: str, matmuls: Any, tmp_path: Path
) -> None:
    code, header, _ = run(
        capsys,
        "best",
        "--operator",
        "matmul",
        "--dtype",
        "float32",
        "--shape",
        "700x700x700",
        "--device",
        A100,
        "--db",
        db_url,
        "--format",
        "header",
    )
    assert code == 0
    (tmp_path / "tuned.h").write_text(header)
    calls = "\n".join(
        f"    {{ const long long s[3] = {{{', '.join(map(str, q))}}};"
        f" const ktune_matmul_float32_config *c = ktune_matmul_float32_select(s);"
        f' if (!c) puts("none"); else'
        f' printf("%d %d %g %s\\n", c->tile_m, c->split_k, c->ratio, c->layout); }}'
        for q in QUERIES
    )
    program = f'#include <stdio.h>\n#include "tuned.h"\nint main(void) {{\n{calls}\n'
    program += (
        '    printf("%d %d\\n", KTUNE_MATMUL_FLOAT32_TILE_M, '
        "KTUNE_MATMUL_FLOAT32_4096X4096X4096_TILE_M);\n    return 0;\n}\n"
    )
    (tmp_path / "main.c").write_text(program)
    (tmp_path / "main.cpp").write_text(program)
    outputs = []
    for compiler, source in (("gcc", "main.c"), ("g++", "main.cpp")):
        exe = tmp_path / f"prog-{compiler}"
        std = ["-std=c11"] if compiler == "gcc" else ["-std=c++17"]
        build = subprocess.run(
            [compiler, *std, "-Wall", "-Wextra", "-Werror", "-o", str(exe), source, "-lm"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert build.returncode == 0, build.stderr
        outputs.append(
            subprocess.run(
                [str(exe)], capture_output=True, text=True, check=True
            ).stdout.splitlines()
        )
    assert outputs[0] == outputs[1]
    expected = []
    for q in QUERIES:
        answer = ktune.lookup("matmul", q, dtype="float32", device=A100, db=db_url)
        if answer is None or answer.tier not in ("exact", "nearest_shape"):
            expected.append("none")  # nothing tuned within the distance limit (1^3, 10^5^3)
            continue
        c = answer.config
        expected.append(f"{c['tile_m']} {int(c['split-k'])} {c['ratio']:g} {c['layout']}")
    assert outputs[0][:-1] == expected
    assert expected.count("none") == 2
    asked = ktune.lookup("matmul", (700, 700, 700), dtype="float32", device=A100, db=db_url)
    assert asked is not None
    assert outputs[0][-1] == f"{asked.config['tile_m']} {matmuls[(4096, 4096, 4096)]['tile_m']}"


def test_header_of_an_operator_without_tuned_shapes(
    capsys: pytest.CaptureFixture[str], db_url: str, matmuls: Any
) -> None:
    code, _, err = run(
        capsys,
        "best",
        "--operator",
        "conv2d",
        "--device",
        A100,
        "--db",
        db_url,
        "--format",
        "header",
    )
    assert code == 1 and err.strip().startswith("error: no tuned shapes of conv2d")
