"""A job's source on an NVIDIA GPU, measured by the ``cupy`` backend.

Three kinds of options open one: a registered operator on a local CUDA device
(:class:`GpuOptions`), the same on a GPU that a Ray cluster offers (:class:`RayOptions`), and
the kernel of a T1 spec, locally or on Ray (:class:`CustomOptions`). The space's constraints
come from the device's limits, so a resumed job checks that the device and the space are the
ones it started with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ktune.search_space.operators import DeviceLimits, Operator
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import Backend, BackendError
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.sources.base import MeasuredSource, SourceError, restricted
from ktune.tuner.sources.environment import Environment
from ktune.tuner.sources.options import CustomOptions, GpuOptions, RayOptions, pin

__all__ = ["GpuOptionsAny", "GpuSource"]

GpuOptionsAny = GpuOptions | RayOptions | CustomOptions


@dataclass(frozen=True)
class GpuSource(MeasuredSource):
    """``operator``'s space for the GPU whose ``spec`` was detected, under ``options``
    (which pin the workload, the device's name and the space's fingerprint)."""

    options: GpuOptionsAny
    operator: Operator
    space: SearchSpace
    spec: dict[str, Any]

    @classmethod
    def from_options(cls, options: GpuOptionsAny, env: Environment) -> GpuSource:
        """Build the operator, find the device (local index, or probed on the Ray cluster),
        build the space; refuse another workload, device or space than ``options`` pin."""
        operator, workload = _operator(options, env)
        placement = _placement(options)
        device = 0 if isinstance(options, RayOptions) else options.device
        if placement is not None:
            specs = [env.ray_gpu(placement)]
            where = placement.describe()
        else:
            specs = env.local_gpus()
            where = f"device {device}"
        if not 0 <= device < len(specs):
            raise SourceError(f"no CUDA device {device} (this machine has {len(specs)})")
        spec = dict(specs[device])
        space = restricted(
            operator.space(workload, DeviceLimits.from_spec(spec)),
            options.constraints,
            workload,
            spec,
        )
        source = cls(options, operator, space, spec)
        return replace(source, options=pin(options, workload, source, where))

    @property
    def backend_name(self) -> str:
        """``ray`` for a job measured on a Ray cluster (so that runners without a GPU can take
        just those: ``ktune worker --backend ray``), else ``cupy`` (the local GPU)."""
        return self.options.backend

    @property
    def workload(self) -> Workload:
        workload = self.options.workload
        assert workload is not None  # pinned when opened
        return workload

    @property
    def device(self) -> int:
        """The local CUDA device's index (0 on Ray: the cluster picks the GPU)."""
        return 0 if isinstance(self.options, RayOptions) else self.options.device

    @property
    def placement(self) -> RayPlacement | None:
        return _placement(self.options)

    @property
    def description(self) -> str:
        placement = self.placement
        return (
            f"measured on {placement.describe()}"
            if placement
            else f"measured on CUDA device {self.device}"
        )

    def backend(self) -> Backend:
        from ktune.tuner.measure.cupy_backend import CupyBackend

        placement = self.placement
        op: str | Operator = (
            self.operator if isinstance(self.options, CustomOptions) else self.operator.name
        )
        backend = CupyBackend(
            op,
            self.workload,
            devices=[self.device],
            settings=self.options.timing,
            timeout_s=self.options.timeout_s,
            ray=placement,
        )
        if backend.device_name != self.device_name:  # Ray gave another kind of GPU than it probed
            backend.close()
            raise BackendError(
                f"the job tunes for {self.device_name} but its workers got {backend.device_name}"
                + (
                    " (name the GPU with --gpu-type)"
                    if placement and not placement.gpu_type
                    else ""
                )
            )
        return backend


def _operator(options: GpuOptionsAny, env: Environment) -> tuple[Operator, Workload]:
    """The operator and the workload ``options`` tune (a custom kernel's: its T1 spec's)."""
    from ktune.search_space import operators

    if isinstance(options, CustomOptions):
        from ktune.search_space.operators.custom import CustomOperator
        from ktune.tuner.sources.custom import custom_operator

        custom = custom_operator(options, env.kernel_hooks)
        assert isinstance(custom, CustomOperator)
        return custom, custom.workload()
    operator = operators.get(options.operator)
    wl = options.workload
    return operator, operator.workload(wl.shape, wl.dtype, wl.layout)


def _placement(options: GpuOptionsAny) -> RayPlacement | None:
    if isinstance(options, RayOptions):
        return options.placement
    if isinstance(options, CustomOptions):
        return options.placement
    return None
