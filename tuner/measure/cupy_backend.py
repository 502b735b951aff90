"""The ``cupy`` backend: configs compiled with NVRTC and timed on the local NVIDIA GPU(s).

Measurement runs in worker processes (:class:`~ktune.tuner.measure.pool.WorkerPool`, one per GPU,
each holding its CUDA context) built by :func:`~ktune.tuner.measure.worker.make_measurer`, or, given
a :class:`~ktune.tuner.measure.ray_pool.RayPlacement`, in actors on GPUs of a Ray cluster (every one
of them the same kind of GPU). What a worker cannot answer becomes a status, never an
exception: a worker that dies is a ``runtime_error``, one that does not answer within
``timeout_s`` a ``timeout``; either way it is replaced and the job goes on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ktune.search_space.operators import Operator
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.pool import Factory, SlotPool, WorkerPool
from ktune.tuner.measure.pooled import PooledBackend
from ktune.tuner.measure.ray_pool import RayPlacement, RayWorkerPool
from ktune.tuner.measure.worker import MeasureSpec, TimingSettings, make_measurer

__all__ = ["CupyBackend"]


class CupyBackend(PooledBackend):
    name = "cupy"

    def __init__(
        self,
        operator: str | Operator,
        workload: Workload,
        *,
        devices: Sequence[int] = (0,),
        settings: TimingSettings | None = None,
        timeout_s: float = 30.0,
        seed: int = 0,
        factory: Factory | None = None,
        ray: RayPlacement | None = None,
    ) -> None:
        """``devices``: local CUDA device indices; ``ray``: measure on a Ray cluster instead.
        ``factory`` replaces the GPU measurer (tests plant crashing or hanging ones)."""
        spec = MeasureSpec(operator, workload.key, settings or TimingSettings(), seed)
        self.workload = workload
        factory = factory or functools.partial(make_measurer, spec)
        self.pool: SlotPool = (
            RayWorkerPool(factory, ray, timeout_s=timeout_s)
            if ray is not None
            else WorkerPool(factory, slots=list(devices), timeout_s=timeout_s)
        )
        try:
            self.spec: dict[str, Any] = dict(self.pool.hello() or {})
            if ray is not None:
                self._check_same_gpu()
        except BackendError:
            self.pool.close()
            raise
        self.timeout_s = timeout_s

    def _check_same_gpu(self) -> None:
        """Start every Ray worker now and refuse a mix of GPUs: a job's times must be comparable."""
        for slot in self.pool.slots[1:]:
            name = dict(self.pool.hello(slot) or {}).get("name")
            if name != self.spec.get("name"):
                raise BackendError(
                    "Ray placed workers on different GPUs "
                    f"({self.spec.get('name')!r} and {name!r}); "
                    "name one kind with --gpu-type"
                )
