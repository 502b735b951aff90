"""``ktune.tune``: the C example kernel tuned for real on this CPU, every trial in the log, the
planted failures recorded as their statuses, and bad input refused before anything runs."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ktune
from ktune.cli.app import main
from ktune.db import TuningLog

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_kernel"
N = 48
PARAMS: dict[str, list[Any]] = {
    "tile_x": [16, 48],
    "tile_y": [4, 16],
    "unroll_x": [1, 4],
    "threads": [1],
}
_ENTRY = "void stencil(float *restrict out, const float *restrict in)\n{"
#: the example with a ``fault`` knob: 0 as written; 1 crashes; 2 hangs; 3 writes past the end
#: of ``out``; 4 computes a wrong value; 5 does not compile
PLANTED = (
    "#if fault == 1\n#define PLANT volatile int *p = 0; *p = 1;\n"
    "#elif fault == 2\n#define PLANT for (volatile int i = 0; ; i++) {}\n"
    "#elif fault == 3\n#define PLANT out[NX * NY + 3] = 1.0f;\n"
    "#elif fault == 5\n#error planted compile error\n"
    "#else\n#define PLANT\n#endif\n"
    + (EXAMPLE / "stencil.c")
    .read_text()
    .replace(_ENTRY, _ENTRY + "\n    PLANT")
    .replace("out[y * NX + x] = 0.25f", "out[y * NX + x] = (fault == 4) + 0.25f")
)


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The arguments' .npz files go to the test's own data directory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def problem() -> tuple[list[np.ndarray], list[Any]]:
    grid = np.random.default_rng(0).random((N + 2, N + 2), dtype=np.float32)
    out = np.zeros((N, N), np.float32)
    ref = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
    return [out, grid], [ref, None]


def checks_first_row(answer: list[Any], outputs: list[Any], atol: float) -> bool:
    """A Kernel Tuner style verify: run in the measuring process, so module-level."""
    return bool(np.allclose(outputs[0][0], answer[0][0], atol=atol))


def test_the_c_example_is_tuned_recorded_and_read_back(db_url: str, capsys) -> None:
    args, answer = problem()
    result = ktune.tune(
        "stencil",
        EXAMPLE / "stencil.c",
        (N, N),
        args,
        PARAMS,
        restrictions=["tile_x * tile_y <= 256", lambda c: c["unroll_x"] <= c["tile_x"]],
        answer=answer,
        atol=1e-5,
        metrics={"GB/s": lambda p: 8 * N * N / (p["time"] * 1e6)},
        objective="GB/s",
        budget=4,
        seed=2,
        db=db_url,
    )
    assert len(result.trials) == 4 and all(t.status == "ok" for t in result.trials)
    assert all(t.config["tile_x"] * t.config["tile_y"] <= 256 for t in result.trials)
    assert result.best is not None and result.best.metrics["GB/s"] == max(
        t.metrics["GB/s"] for t in result.trials
    )
    assert result.workload == f"stencil/{N}x{N}/-"
    with TuningLog.open(db_url) as tlog:
        job = tlog.get_job(result.job_id)
        assert job is not None and job.state == "done" and job.n_trials == 4
        assert job.spec.backend == "cpu"
    assert main(["best", "--db", db_url, "-w", result.workload, "-d", result.device,
                 "--format", "json"]) == 0  # fmt: skip
    assert str(result.best.config["tile_x"]) in capsys.readouterr().out


def test_planted_crash_hang_overrun_wrong_and_compile_error_are_recorded(db_url: str) -> None:
    args, answer = problem()
    result = ktune.tune(
        "stencil",
        PLANTED,
        (N, N),
        args,
        {
            "fault": [0, 1, 2, 3, 4, 5],
            "tile_x": [16],
            "tile_y": [4],
            "unroll_x": [1],
            "threads": [1],
        },
        lang="C",
        answer=answer,
        atol=1e-5,
        verify=checks_first_row,
        timeout=3.0,
        db=db_url,
        strategy="random",
        seed=0,
    )
    status = {t.config["fault"]: t.status for t in result.trials}
    assert status == {
        0: "ok",
        1: "runtime_error",
        2: "timeout",
        3: "runtime_error",
        4: "wrong_result",
        5: "compile_error",
    }
    errors = {t.config["fault"]: t.error for t in result.trials}
    assert "past the end" in errors[3] and "planted compile error" in errors[5]
    assert result.best is not None and result.best.config["fault"] == 0


def _raises_on_big_tiles(config: dict[str, Any]) -> bool:
    if config["tile_x"] > 16:
        raise ZeroDivisionError("planted")
    return True


def test_a_raising_restriction_leaves_its_configs_out_and_says_so_once(db_url: str) -> None:
    args, _ = problem()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ktune.tune(
            "stencil", EXAMPLE / "stencil.c", (N, N), args, PARAMS,
            restrictions=_raises_on_big_tiles, budget=2, db=db_url,
        )  # fmt: skip
    said = [w for w in caught if "restriction raised" in str(w.message)]
    assert len(said) == 1 and "ZeroDivisionError" in str(said[0].message)
    assert all(t.config["tile_x"] == 16 for t in result.trials)


def test_a_job_with_python_callables_resumes_only_through_ktune_tune(db_url: str, capsys) -> None:
    args, _ = problem()
    first = ktune.tune(
        "stencil", EXAMPLE / "stencil.c", (N, N), args, PARAMS,
        restrictions=lambda c: True, budget=2, db=db_url,
    )  # fmt: skip
    with TuningLog.open(db_url) as tlog:
        tlog.set_job_state(first.job_id, "cancelled")
    assert main(["tune", "--resume", str(first.job_id), "--db", db_url, "-q"]) == 2
    assert "resume it with ktune.tune" in capsys.readouterr().err
    again = ktune.tune(
        "stencil", EXAMPLE / "stencil.c", (N, N), args, PARAMS,
        restrictions=lambda c: True, db=db_url, resume=first.job_id,
    )  # fmt: skip
    assert again.job_id == first.job_id and len(again.trials) == 2


@pytest.mark.parametrize(
    ("change", "argument", "words"),
    [
        ({"restrictions": ["tile_x <<>> 2"]}, "restrictions[0]", ""),
        ({"restrictions": ["tile_q > 2"]}, "restrictions[0]", "tile_q"),
        ({"tune_params": {"tile_x": 16}}, "tune_params['tile_x']", "not a non-empty list"),
        ({"tune_params": {}}, "tune_params", "dict"),
        ({"arguments": [np.zeros(4, np.float32), 3]}, "arguments[1]", "numpy scalar"),
        ({"answer": [np.zeros((N, N + 1)), None]}, "answer[0]", "shape"),
        ({"answer": [None]}, "answer", "1 entries for 2 arguments"),
        ({"kernel_source": "x" * (300 * 1024)}, "kernel_source", "limit"),
        ({"lang": "OpenCL"}, "lang", "C and CUDA"),
        ({"problem_size": (0, 4)}, "problem_size", "positive"),
        ({"objective": "GFLOP/s"}, "objective", "metric"),
        ({"verify": lambda a, b, atol: True}, "verify", "module-level"),
        ({"budget": 0}, "budget/strategy/batch_size", "budget"),
    ],
)
def test_bad_input_is_one_error_naming_the_argument_and_nothing_is_recorded(
    db_url: str, change: dict[str, Any], argument: str, words: str
) -> None:
    args, _ = problem()
    call: dict[str, Any] = {
        "kernel_name": "stencil",
        "kernel_source": EXAMPLE / "stencil.c",
        "problem_size": (N, N),
        "arguments": args,
        "tune_params": PARAMS,
        "db": db_url,
        "budget": 1,
    }
    call.update(change)
    with pytest.raises(ktune.TuneInputError) as caught:
        ktune.tune(**call)
    assert caught.value.argument == argument and words in str(caught.value)
    with TuningLog.open(db_url) as tlog:
        assert tlog.list_jobs() == []
