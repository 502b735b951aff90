"""No measuring process outlives its job: after ``kill -9`` of the process that measures (a
``ktune tune`` or ``ktune worker``) while a planted kernel hangs, its measuring worker is gone
within moments; a compile that times out takes its whole process tree with it; the work
directory a killed process left behind is removed at the next start."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktune.tuner.measure import cpu_worker
from ktune.tuner.measure.cpu_worker import Compiler
from ktune.tuner.measure.workdirs import make_workdir, sweep_workdirs

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

ROOT = Path(__file__).resolve().parents[2]

# A process measuring a kernel that never ends, with a timeout far beyond the test's patience.
MEASURER = """
import sys
from ktune.tuner.measure.cpu_backend import CpuBackend
from ktune.tuner.measure.timing import TimingSettings
from tests.tuner.cpu_planted import Planted

op = Planted()
backend = CpuBackend(op, op.workload("64"), settings=TimingSettings(warmup=1, min_repeats=1,
                     min_time_s=0.0, max_repeats=1), timeout_s=600.0)
print(backend.pool.pid(), backend.workdir, flush=True)
backend.measure([{"behaviour": "hang"}])
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead, waiting for its parent to read its status
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_kill_9_of_the_measuring_process_leaves_no_hung_kernel_running() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", MEASURER], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    worker = 0
    try:
        assert parent.stdout is not None
        worker_text, workdir = parent.stdout.readline().split()
        worker = int(worker_text)
        deadline = time.monotonic() + 60
        while cpu_seconds(worker) < 0.5:  # compiled, and spinning in the planted kernel
            assert time.monotonic() < deadline, "the planted kernel never ran"
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        survived = not wait_gone(worker, 3.0)
    finally:
        parent.kill()
        if worker and alive(worker):
            os.kill(worker, signal.SIGKILL)  # never leave a spinning orphan behind
    assert not survived, "the measuring worker outlived the process that started it"
    assert Path(workdir).exists()
    assert Path(workdir) in sweep_workdirs()  # the next start removes it
    assert not Path(workdir).exists()


def test_a_live_process_keeps_its_work_directory() -> None:
    mine = Path(make_workdir("test"))
    try:
        assert mine not in sweep_workdirs() and mine.exists()
    finally:
        shutil.rmtree(mine)


def test_a_compile_timeout_kills_the_whole_compiler_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    # A "compiler" whose driver starts a child that would run for minutes, as cc starts cc1.
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    monkeypatch.setattr(cpu_worker, "COMPILE_TIMEOUT_S", 1.0)
    compiler = Compiler(command=("sh", "-c", script), flags=())
    started = time.monotonic()
    ok, message = compiler.compile("int x;", tmp_path / "k.so")
    assert not ok and "did not finish" in message
    assert time.monotonic() - started < 10
    grandchild = int(pidfile.read_text())
    try:
        assert wait_gone(grandchild, 2.0), "the compiler's child outlived the timeout"
    finally:
        if alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
