"""A job's source for a CPU kernel measured on this machine (the ``cpu`` backend).

:class:`CpuSource` builds a CPU operator's space (:mod:`search_space.operators.cpu`) for the
local CPU's limits (cores, vector registers) and measures it with
:class:`~tuner.measure.cpu_backend.CpuBackend`. Like a GPU job, a resumed CPU job checks that
the machine and the space are the ones it started with.
"""

from __future__ import annotations

import functools
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ktune.search_space.operators.cpu import CpuLimits, CpuOperator
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.cpu_backend import CpuBackend, compiler_unavailable
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.measure.cpu_worker import Compiler, CompilerError, compiler_from_env
from ktune.tuner.measure.timing import TimingSettings
from ktune.tuner.sources import MeasuredSource, SourceError, check_unchanged

__all__ = ["CpuSource", "local_cpu"]


def local_cpu() -> dict[str, Any]:
    """This machine's CPU spec, with the C compiler's version (recorded with every trial).
    A :class:`BackendError` when no compiler here builds the kernels (checked by building a
    small one), so that a job is refused before it is created."""
    compiler = compiler_from_env()
    reason = compiler_unavailable(compiler)
    if reason:
        raise BackendError(reason)
    return {**cpu_spec(), "compiler": _checked_version(compiler)}


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
    the ``cpu`` backend with ``settings`` and a ``timeout_s`` per measurement."""

    backend_name: ClassVar[str] = "cpu"
    unnamed: ClassVar[str] = "unknown CPU"
    operator: CpuOperator
    workload: Workload
    space: SearchSpace
    spec: dict[str, Any]
    constraints: tuple[str, ...] = ()
    timeout_s: float = 30.0
    settings: TimingSettings = field(default_factory=TimingSettings)

    @classmethod
    def open(
        cls,
        op: str,
        shape: str | Sequence[int] | None,
        dtype: str = "float32",
        layout: str = "",
        *,
        constraints: Sequence[str] = (),
        timeout_s: float = 30.0,
        settings: TimingSettings | None = None,
        detect: Callable[[], dict[str, Any]] | None = None,
    ) -> CpuSource:
        """Validate the operator and shape, read this CPU's spec, build the space.
        ``detect`` replaces reading the CPU (tests)."""
        from ktune.search_space.operators import cpu

        if not timeout_s > 0:
            raise SourceError(f"timeout must be > 0 seconds, got {timeout_s}")
        if shape is None:
            raise SourceError(f"operator {op!r} needs a shape")
        operator = cpu.get(op)
        workload = operator.workload(shape, dtype, layout)
        spec = detect() if detect is not None else local_cpu()
        space = operator.space(workload, CpuLimits.from_spec(spec))
        if constraints:
            space = space.restrict(constraints)
        if len(space) == 0:
            raise SourceError(
                f"no configuration of {workload.key} fits {spec.get('name')} under the constraints"
            )
        return cls(
            operator,
            workload,
            space,
            dict(spec),
            tuple(constraints),
            float(timeout_s),
            settings or TimingSettings(),
        )

    @classmethod
    def from_options(
        cls, options: dict[str, Any], detect: Callable[[], dict[str, Any]] | None = None
    ) -> CpuSource:
        wl = Workload.from_key(options["workload"])
        source = cls.open(
            options["operator"],
            wl.shape,
            wl.dtype,
            wl.layout,
            constraints=options.get("constraints", ()),
            timeout_s=float(options.get("timeout_s", 30.0)),
            settings=TimingSettings(**options.get("timing", {})),
            detect=detect,
        )
        check_unchanged(source, options, "this machine")
        return source

    def options(self) -> dict[str, Any]:
        return {
            "operator": self.operator.name,
            "workload": self.workload.key,
            "device_name": self.device_name,
            "constraints": list(self.constraints),
            "timeout_s": self.timeout_s,
            "timing": asdict(self.settings),
            "space": self.space.fingerprint(),
        }

    @property
    def description(self) -> str:
        return "measured on this machine's CPU"

    def backend(self) -> CpuBackend:
        backend = CpuBackend(
            self.operator.name, self.workload, settings=self.settings, timeout_s=self.timeout_s
        )
        if (
            backend.device_name != self.device_name
        ):  # the worker sees other cores (affinity changed)
            backend.close()
            raise BackendError(
                f"the job tunes for {self.device_name} but its worker runs on {backend.device_name}"
            )
        return backend
