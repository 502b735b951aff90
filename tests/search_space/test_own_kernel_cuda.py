"""The CUDA example of examples/own_kernel: its T1 spec builds the kernel, each config of a
sample renders to source that nvcc compiles (no GPU needed), and under ``-m gpu`` ktune.tune
measures it for real."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ktune.search_space.operators import DeviceLimits
from ktune.search_space.operators.custom import CustomOperator

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_kernel"


def test_the_spec_builds_the_kernel_and_its_launch() -> None:
    op = CustomOperator.from_t1(EXAMPLE / "transpose.json")
    wl = op.workload()
    space = op.space(wl, DeviceLimits())
    assert len(space) > 0 and op.kernel_name == "transpose"
    launch = op.launch({"block_size_x": 32, "block_size_y": 8, "pad": 1}, wl)
    assert launch.grid[:2] == (4096 // 32, 4096 // 32) and launch.block == (32, 8, 1)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_sampled_configs_compile_with_nvcc(tmp_path: Path) -> None:
    op = CustomOperator.from_t1(EXAMPLE / "transpose.json")
    wl = op.workload()
    space = op.space(wl, DeviceLimits())
    picks = sorted({0, len(space) - 1, len(space) // 2})
    for config in space.configs(picks):
        source = tmp_path / "kernel.cu"
        source.write_text(op.render(config, wl).code)
        done = subprocess.run(
            ["nvcc", "-arch=sm_80", "-c", str(source), "-o", str(tmp_path / "kernel.o")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, (config, done.stderr)


@pytest.mark.gpu
def test_the_cuda_example_tunes_on_the_gpu(db_url: str, tmp_path, monkeypatch) -> None:
    pytest.importorskip("cupy")
    import ktune

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    n = 1024
    matrix = np.random.default_rng(0).random((n, n), dtype=np.float32)
    result = ktune.tune(
        "transpose",
        EXAMPLE / "transpose.cu",
        (n, n),
        [np.zeros((n, n), np.float32), matrix, np.int32(n), np.int32(n)],
        {"block_size_x": [16, 32], "block_size_y": [1, 4], "pad": [0, 1]},
        grid_div_x=["block_size_x"],
        grid_div_y=["block_size_x"],
        answer=[matrix.T.copy(), None, None, None],
        budget=4,
        db=db_url,
    )
    assert len(result.trials) == 4 and all(t.status == "ok" for t in result.trials)
    assert result.best is not None
