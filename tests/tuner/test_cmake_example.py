"""``examples/cmake`` as a user builds it: the header comes from the tuning log at build time,
a rebuild with the same answers recompiles nothing, a new tuned shape reaches the program,
and a failed lookup fails the build without touching the header it had."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ktune
from ktune.db import TrialIn, TuningLog
from ktune.tuner.sources import bundled_recordings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cmake"
A4000 = "NVIDIA RTX A4000"
KTUNE = Path(sys.executable).with_name("ktune")

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("cc") is None or not KTUNE.exists(),
    reason="needs cmake, a C compiler and the ktune command of this environment",
)


def _cmake(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["cmake", *args], capture_output=True, text=True, timeout=300, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(done.stdout + done.stderr)
    return done


def _show(build: Path, *shape: int) -> dict[str, int]:
    out = subprocess.run(
        [str(build / "show_config"), *map(str, shape)], capture_output=True, text=True, check=True
    ).stdout
    return {k: int(v) for k, v in (item.split("=") for item in out.split())}


def test_a_cmake_build_reads_its_configs_from_the_log(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    subprocess.run(
        [str(KTUNE), "import", str(bundled_recordings()["convolution_A4000"]), "--db", url],
        check=True,
        capture_output=True,
    )
    build = tmp_path / "build"
    _cmake(
        "-S",
        str(EXAMPLE),
        "-B",
        str(build),
        f"-DKTUNE={KTUNE}",
        f"-DKTUNE_DEVICE={A4000}",
        f"-DKTUNE_DB={url}",
    )
    _cmake("--build", str(build))
    answer = ktune.lookup(workload="convolution_kernel/4096x4096/-", device=A4000, db=url)
    assert answer is not None and _show(build, 4096, 4096) == answer.config

    header = build / "generated" / "ktune_convolution_kernel.h"
    stamp = header.stat().st_mtime_ns
    again = _cmake("--build", str(build))
    assert header.stat().st_mtime_ns == stamp and "Building C object" not in again.stdout

    # a newly tuned shape reaches the program on the next build
    config = dict(answer.config, block_size_x=32, tile_size_x=8)
    with TuningLog.open(url) as tlog:
        wl = tlog.get_or_create_workload(
            "convolution_kernel/1024x1024/-", "convolution_kernel", (1024, 1024), ""
        )
        dev = tlog.get_or_create_device(A4000)
        tlog.add_trials(
            None,
            wl.id,
            dev.id,
            "import",
            [TrialIn(config=config, config_key=json.dumps(config), status="ok", time_ms=0.1)],
        )
    rebuilt = _cmake("--build", str(build))
    assert "Building C object" in rebuilt.stdout
    assert _show(build, 1000, 1000) == config and _show(build, 4096, 4096) == answer.config

    # the log gone: the build fails, saying why, and the header is the one it had
    before = header.read_bytes()
    (tmp_path / "k.db").unlink()
    failed = _cmake("--build", str(build), check=False)
    assert failed.returncode != 0 and "no such tuning log" in failed.stdout + failed.stderr
    assert header.read_bytes() == before
