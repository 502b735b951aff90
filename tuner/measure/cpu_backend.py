"""The ``cpu`` backend: CPU kernels compiled with the system C compiler and timed on this machine.

Measurement runs in one worker process (:class:`~ktune.tuner.measure.pool.WorkerPool`; a kernel that
crashes or hangs takes only the worker down) built by
:func:`~ktune.tuner.measure.cpu_worker.make_cpu_measurer`. One worker, not one per core: kernels
use the cores themselves (the ``threads`` knob), and two measurements at once would disturb
each other's times; for the same reason every CPU backend on the machine measures its batches
one at a time (:func:`machine_lock`). Compiled libraries live in a temporary directory removed
on close.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ktune.search_space.operators.cpu import CpuOperator
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import BackendError, Measurement
from ktune.tuner.measure.cpu_worker import (
    Compiler,
    CpuMeasureSpec,
    compiler_from_env,
    make_cpu_measurer,
)
from ktune.tuner.measure.pool import Factory, WorkerPool
from ktune.tuner.measure.pooled import PooledBackend
from ktune.tuner.measure.timing import TimingSettings
from ktune.tuner.measure.workdirs import make_workdir

__all__ = ["CpuBackend", "compiler_unavailable", "machine_lock"]

log = logging.getLogger(__name__)


def compiler_unavailable(compiler: Compiler | None = None) -> str | None:
    """Why no CPU kernel can be built here without starting anything (no compiler), or None."""
    compiler = compiler or compiler_from_env()
    if shutil.which(compiler.command[0]) is None:
        return (
            f"no C compiler: {compiler.command[0]!r} not found "
            "(install gcc or clang, or name one with KTUNE_CC)"
        )
    return None


#: held (``flock``) while a batch is measured, by every CPU backend of every process here
LOCK_PATH = Path(tempfile.gettempdir()) / "ktune-cpu-measure.lock"


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """One CPU measurement at a time on this machine: two jobs timing kernels on the same cores
    at once (two runner slots, two workers) would each measure the other's load."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    fd = _open_lock()
    if fd is None:
        log.warning("cannot open %s: measuring without the machine's CPU lock", LOCK_PATH)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _open_lock() -> int | None:
    """A descriptor of the lock file (every user's processes share it, and flock needs only a
    read-only descriptor), or None when it can be neither created nor read here."""
    for flags in (os.O_RDONLY | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(LOCK_PATH, flags, 0o644)
        except OSError:
            continue
    return None


class CpuBackend(PooledBackend):
    name = "cpu"
    unnamed = "unknown CPU"

    def __init__(
        self,
        operator: str | CpuOperator,
        workload: Workload,
        *,
        settings: TimingSettings | None = None,
        timeout_s: float = 30.0,
        seed: int = 0,
        compiler: Compiler | None = None,
        factory: Factory | None = None,
    ) -> None:
        """``operator``: a registered CPU operator's name or an instance (tests plant crashing
        ones); ``factory`` replaces the measurer altogether."""
        compiler = compiler or compiler_from_env()
        if factory is None and (reason := compiler_unavailable(compiler)):
            raise BackendError(reason)
        self.workload = workload
        self.workdir = make_workdir("cpu")  # removed at the next start if this process is killed
        spec = CpuMeasureSpec(
            operator, workload.key, self.workdir, compiler, settings or TimingSettings(), seed
        )
        try:
            self.pool = WorkerPool(
                factory or functools.partial(make_cpu_measurer, spec),
                slots=[0],
                timeout_s=timeout_s,
            )
            self.spec: dict[str, Any] = dict(self.pool.hello() or {})
        except BackendError:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise

    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        with machine_lock():
            return super().measure(configs)

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.workdir, ignore_errors=True)
