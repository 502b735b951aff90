"""``make gpu-check`` (``.ci/gpu_check.py``) on a machine without an NVIDIA GPU: one line saying
so, exit 2, nothing installed or written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "gpu_check.py"


def _run(path: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)],
        env={"PATH": path, "HOME": str(out.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_nvidia_smi_it_says_so_and_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = _run(str(empty), tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and "no NVIDIA GPU" in lines[0] and "nvidia-smi not found" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("code", "listing"), [(9, ""), (0, "")])
def test_an_nvidia_smi_that_lists_no_gpu_counts_as_none(
    tmp_path: Path, code: int, listing: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{listing}'\nexit {code}\n")
    smi.chmod(0o755)
    proc = _run(f"{bin_dir}:/usr/bin:/bin", tmp_path / "out")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and "nvidia-smi lists no GPU" in lines[0]


def test_the_report_shows_where_a_measurements_time_goes() -> None:
    """The measure_cost step's tables (from its whole output, not the output's tail) land in
    report.md, so a lent GPU's split of a measurement's time is read off the report, not dug
    out of a log."""
    module = load_script(SCRIPT)
    flush = (
        "L2 flush of 120 MiB: ms per call\n\n| flush | ms per call |\n|---|---|\n| memset | 0.03 |"
    )
    table = "| case | config | status |\n|---|---|---|\n| softmax:1024x32000:float16 | 7 | ok |"
    output = f"device: GPU; times in ms\n\n{flush}\n\n{table}\n"
    report = {
        "device": {"name": "GPU", "arch": "sm_90", "cuda_runtime": 1, "driver": 1, "cupy": "14"},
        "date": "2026-11-26",
        "seconds": 1.0,
        "steps": {
            "measure cost": {"ok": True, "status": "exit 0", "tail": output[-40:], "output": output}
        },
        "benchmark": [],
        "failed": [],
    }
    text = module.markdown(report)
    assert "Where a measurement's time goes" in text
    assert "| softmax:1024x32000:float16 | 7 | ok |" in text and "device: GPU" not in text
    # both tables whole, each after a blank line (two tables run together render as one)
    assert f"\n\n{flush}\n\n{table}" in text


def test_measure_cost_without_a_gpu_says_so_and_exits_2(tmp_path: Path) -> None:
    script = SCRIPT.parent.parent / "benchmarks" / "measure_cost.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--configs", "1"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "needs an NVIDIA GPU" in lines[0], lines
