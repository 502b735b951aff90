"""``make gpu-check`` (``.ci/gpu_check.py``) on a machine without an NVIDIA GPU: one line saying
so, exit 2, nothing installed or written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
