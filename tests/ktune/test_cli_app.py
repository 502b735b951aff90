"""The ``ktune`` command line loads a command's module only to run it: ``ktune --help`` lists
every command from a table, and ``ktune best`` (run by a build once per kernel) loads no
Typer, click, pydantic, SQLAlchemy, Alembic, numpy or rich."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ktune.cli.app import COMMANDS, load, main
from ktune.db import JobSpec, TrialIn, TuningLog

A4000 = "NVIDIA RTX A4000"
HEAVY = ("typer", "click", "pydantic", "sqlalchemy", "alembic", "numpy", "rich")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _first_paragraph(text: str) -> str:
    return " ".join(text.split("\n\n")[0].split())


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_table_says_what_each_command_says_of_itself(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = load(name)
    assert _first_paragraph(command.help or "") == COMMANDS[name].help
    code, out, _ = run(capsys, name, "--help")
    assert code == 0 and f"ktune {name}" in out


def test_help_lists_every_command_without_loading_one() -> None:
    code = (
        "import json, sys\n"
        "from ktune.cli.app import main\n"
        "assert main(['--help']) == 0\n"
        "names = [m for m in sys.modules if m.startswith(('ktune.', 'typer', 'click'))]\n"
        "print(json.dumps(sorted(names)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    *help_lines, loaded = done.stdout.splitlines()
    assert json.loads(loaded) == [  # the table, and what every command shares
        "ktune.cli",
        "ktune.cli.app",
        "ktune.cli.common",
        "ktune.db",
        "ktune.db.errors",
        "ktune.db.urls",
    ]
    flat = " ".join(" ".join(help_lines).split())
    for name, entry in COMMANDS.items():
        assert f"{name} {entry.help}" in flat


def test_no_command_prints_the_help_and_an_unknown_one_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys)
    assert code == 0 and "Commands:" in out
    code, _, err = run(capsys, "bset")
    assert (
        code == 2 and err == "error: No such command 'bset': run `ktune --help` for the commands.\n"
    )
    code, _, err = run(capsys, "--version")
    assert code == 2 and err.startswith("error: No such option '--version'")


def test_the_typer_group_parses_a_command_line_as_ktune_would() -> None:
    """What tools (the compose test) use: the group lists the table and loads a command."""
    import typer

    from ktune.cli.app import app

    group = typer.main.get_command(app)
    ctx = group.context_class(group)
    assert group.list_commands(ctx) == list(COMMANDS)
    serve = group.get_command(ctx, "serve")
    assert serve.make_context("serve", ["--port", "9"]).params["port"] == 9


@pytest.fixture
def log(tmp_path: Path) -> str:
    """A recorded operator ``kw`` tuned on an A4000 at two shapes, and one tuning job."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    with TuningLog.open(url) as tlog:
        d = tlog.get_or_create_device(A4000)
        for i, shape in enumerate(((1024, 1024), (4096, 4096))):
            key = f"kw/{shape[0]}x{shape[1]}/-"
            w = tlog.get_or_create_workload(key, "kw", shape)
            trial = TrialIn({"block": 32 * (i + 1)}, str(i), "ok", time_ms=1.0 + i)
            tlog.add_trials(None, w.id, d.id, "import", [trial])
            job = tlog.create_job(JobSpec(w.id, d.id, "replay", "random", 7, 4, 10, 60.0, None))
            tlog.add_trials(job.id, w.id, d.id, "replay", [replace(trial, seq=0)])
            tlog.set_job_state(job.id, "done")
    return url


@pytest.mark.parametrize("fmt", ["json", "env", "header"])
@pytest.mark.parametrize("shape", ["1024x1024", "2000x2000"])
def test_a_build_time_lookup_loads_only_what_it_needs(log: str, fmt: str, shape: str) -> None:
    argv = ["best", "--operator", "kw", "--shape", shape, "-d", A4000, "-f", fmt, "--db", log]
    code = (
        "import sys\n"
        "from ktune.cli.app import main\n"
        f"assert main({argv!r}) == 0\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("operator", "shape"), [("cpu_matmul", "128x128x128"), ("conv2d", "1x16x16x16x16x3x3")]
)
def test_a_lookup_on_ktunes_own_operators_builds_the_workload_without_the_kernels(
    tmp_path: Path, operator: str, shape: str
) -> None:
    """As tune builds it (default dtype, a convolution's short form), from the operator's
    workload form: no numpy, which its kernels need."""
    from ktune.search_space.operators import cpu, get

    op = cpu.get(operator) if operator in cpu.names() else get(operator)
    workload = op.workload(shape)
    url = f"sqlite:///{tmp_path / 'own.db'}"
    with TuningLog.open(url) as tlog:
        d = tlog.get_or_create_device(A4000)
        w = tlog.get_or_create_workload(
            workload.key, workload.operator, workload.shape, workload.dtype, workload.layout
        )
        tlog.add_trials(None, w.id, d.id, "import", [TrialIn({"t": 1}, "1", "ok", time_ms=1.0)])
    argv = ["best", "--operator", operator, "--shape", shape, "-d", A4000, "-f", "json"]
    code = (
        "import sys\n"
        "from ktune.cli.app import main\n"
        f"assert main({[*argv, '--db', url]!r}) == 0\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    *answer, loaded = done.stdout.splitlines()
    assert loaded == "[]"
    assert json.loads("\n".join(answer))["workload"] == workload.key


@pytest.fixture
def matmul_log(tmp_path: Path) -> str:
    """One tuned fp32 matmul shape whose config uses vector width 4 (K and N must be
    multiples of 4 wherever it serves)."""
    url = f"sqlite:///{tmp_path / 'matmul.db'}"
    with TuningLog.open(url) as tlog:
        d = tlog.get_or_create_device(A4000)
        w = tlog.get_or_create_workload(
            "matmul/1024x1024x1024/float32", "matmul", (1024,) * 3, "float32", ""
        )
        config = {"block_size_x": 16, "block_size_y": 16, "vector_width": 4}
        tlog.add_trials(None, w.id, d.id, "import", [TrialIn(config, "1", "ok", time_ms=1.0)])
    return url


@pytest.mark.parametrize("fmt", ["json", "header"])
def test_a_nearest_shape_answer_is_checked_without_loading_the_kernels(
    matmul_log: str, fmt: str
) -> None:
    """A config tuned at another shape is judged at the asked one by the operator's
    requirements, which its workload form carries: no numpy (which the kernels need)."""
    ask = ["best", "-d", A4000, "-f", fmt, "--db", matmul_log, "-w"]
    code = (
        "import sys\n"
        "from ktune.cli.app import main\n"
        f"assert main({[*ask, 'matmul/1000x1024x1024/float32']!r}) == 0\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    *out, loaded = done.stdout.splitlines()
    assert loaded == "[]", done.stderr
    if fmt == "json":
        assert json.loads("\n".join(out))["validity"] == "checked"
    else:
        assert "ktune_matmul_float32_valid" in "\n".join(out)


def test_a_nearest_shape_config_that_would_compute_wrong_is_refused(
    matmul_log: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """N = 1026 is no multiple of the tuned config's vector width 4."""
    ask = ["-w", "matmul/1024x1026x1024/float32", "-d", A4000, "--db", matmul_log]
    code, _, err = run(capsys, "best", *ask, "-f", "json")
    assert code == 1
    assert "breaks K % vector_width == 0 and N % vector_width == 0 at [1024, 1026, 1024]" in err


def test_jobs_for_scripts(log: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "jobs", "--format", "json", "--db", log)
    rows = json.loads(out)
    assert code == 0 and [r["id"] for r in rows] == [2, 1]
    first = rows[-1]
    assert {k: first[k] for k in ("state", "workload", "device", "backend", "strategy")} == {
        "state": "done",
        "workload": "kw/1024x1024/-",
        "device": A4000,
        "backend": "replay",
        "strategy": "random",
    }
    assert first["budget"] == {"trials": 10, "seconds": 60.0, "target_ms": None}
    assert first["best_trial"] == 0 and first["best_config"] == {"block": 32}
    assert first["created_at"].endswith("Z") and first["seed"] == 7
    code, out, _ = run(capsys, "jobs", "-f", "csv", "--state", "done", "--db", log)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("id,state,workload,device,backend,strategy,seed")
    assert [line.split(",")[0] for line in lines[1:]] == ["2", "1"]
    code, out, _ = run(capsys, "jobs", "--db", log)
    assert code == 0 and "kw/4096x4096/-" in out
