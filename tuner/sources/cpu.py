"""A job's source for a CPU kernel measured on this machine (the ``cpu`` backend).

:class:`CpuSource` builds a CPU operator's space (``ktune.search_space.operators.cpu``) for the
local CPU's limits (cores, vector registers) and measures it with
:class:`~ktune.tuner.measure.cpu_backend.CpuBackend`. Like a GPU job, a resumed CPU job checks
that the machine and the space are the ones it started with.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from ktune.search_space.operators.cpu import CpuLimits, CpuOperator
from ktune.search_space.operators.cpu.custom import CustomCpuOperator
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.cpu_backend import CpuBackend, compiler_unavailable
from ktune.tuner.measure.cpu_detect import cpu_spec, former_names
from ktune.tuner.measure.cpu_worker import Compiler, CompilerError, compiler_from_env
from ktune.tuner.sources.base import MeasuredSource, restricted
from ktune.tuner.sources.custom import KernelHooks, custom_operator
from ktune.tuner.sources.options import CpuOptions, CustomOptions, pin

__all__ = ["CpuSource", "local_cpu"]


def local_cpu() -> dict[str, Any]:
    """This machine's CPU spec, with the C compiler's version and flags (recorded with every
    trial: ``ktune build`` compiles the shipped kernels with the same flags).
    A :class:`BackendError` when no compiler here builds the kernels (checked by building a
    small one), so that a job is refused before it is created."""
    compiler = compiler_from_env()
    reason = compiler_unavailable(compiler)
    if reason:
        raise BackendError(reason)
    return {
        **cpu_spec(),
        "compiler": _checked_version(compiler),
        "cflags": " ".join(compiler.flags),
    }


@functools.cache
def _checked_version(compiler: Compiler) -> str:
    """The compiler's version once it has built a small OpenMP library: once per process and
    compiler, not for every job a server accepts or a runner opens (a failure is not kept)."""
    try:
        version = compiler.version()
        with tempfile.TemporaryDirectory(prefix="ktune-cc-") as directory:
            compiler.probe(Path(directory))
    except (OSError, subprocess.SubprocessError, CompilerError) as exc:
        raise BackendError(str(exc)) from None
    return version


@dataclass(frozen=True)
class CpuSource(MeasuredSource):
    """A CPU operator's space on this machine's CPU (``spec``: :func:`local_cpu`), measured by
    the ``cpu`` backend under ``options`` (which pin the CPU's name and the space's
    fingerprint)."""

    unnamed: ClassVar[str] = "unknown CPU"
    options: CpuOptions | CustomOptions
    operator: CpuOperator
    space: SearchSpace
    spec: dict[str, Any]

    @classmethod
    def from_options(
        cls,
        options: CpuOptions | CustomOptions,
        detect: Callable[[], dict[str, Any]],
        hooks: KernelHooks | None = None,
    ) -> CpuSource:
        """Build the operator (a user's C kernel from :class:`CustomOptions`, with the Python
        callables of ``hooks``), read this CPU's spec with ``detect``, build the space; refuse
        another workload, CPU or space than ``options`` pin. Nothing of a user's kernel is
        compiled or run here: that is the backend's, in its worker."""
        from ktune.search_space.operators import cpu

        operator: CpuOperator
        if isinstance(options, CustomOptions):
            custom = custom_operator(options, hooks)
            assert isinstance(custom, CustomCpuOperator)  # options of a C kernel
            operator, workload = custom, custom.workload()
        else:
            operator = cpu.get(options.operator)
            wl = options.workload
            workload = operator.workload(wl.shape, wl.dtype, wl.layout)
        spec = dict(detect())
        if options.device_name and options.device_name in former_names(spec):
            spec["name"] = options.device_name  # a job started before names said more
        space = restricted(
            operator.space(workload, CpuLimits.from_spec(spec)), options.constraints, workload, spec
        )
        source = cls(options, operator, space, spec)
        return replace(source, options=pin(options, workload, source, "this machine"))

    @property
    def backend_name(self) -> str:
        return self.options.backend

    @property
    def workload(self) -> Workload:
        workload = self.options.workload
        assert workload is not None  # pinned when opened
        return workload

    @property
    def description(self) -> str:
        return "measured on this machine's CPU"

    def backend(self) -> CpuBackend:
        options = self.options
        custom = isinstance(options, CustomOptions)  # a user's kernel travels to the worker whole
        backend = CpuBackend(
            self.operator if custom else self.operator.name,
            self.workload,
            settings=options.timing,
            timeout_s=options.timeout_s,
        )
        worker = backend.device_name
        if self.device_name not in (worker, *former_names(backend.spec)):  # other cores
            backend.close()
            raise BackendError(
                f"the job tunes for {self.device_name} but its worker runs on {backend.device_name}"
            )
        return backend
