"""Where sources find what their options name: recordings, GPUs, this machine's CPU.

The defaults read this machine. A caller replaces what it knows better: the service reads
recordings through its catalog's cache (so a job's recording is parsed once) and waits a
bounded time for a Ray cluster's GPU; ``--demo`` hands over the GPUs it already detected;
tests plant devices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktune.search_space.formats import RecordedSpace
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.sources.custom import KernelHooks
from ktune.tuner.sources.recordings import RecordingReader

__all__ = ["Environment"]


def _read_recording(path: Path) -> RecordedSpace:
    from ktune.search_space.formats import load_recording

    return load_recording(path)


def _local_gpus() -> list[dict[str, Any]]:
    from ktune.tuner.measure import detect

    return detect.detect_devices()


def _ray_gpu(placement: RayPlacement) -> dict[str, Any]:
    from ktune.tuner.measure import ray_pool

    return ray_pool.detect_device(placement)


def _local_cpu() -> dict[str, Any]:
    from ktune.tuner.sources.cpu import local_cpu

    return local_cpu()


@dataclass(frozen=True)
class Environment:
    """``read_recording``: a recording at a path; ``local_gpus``: the specs of this machine's
    CUDA devices (a :class:`BackendError` without any); ``ray_gpu``: the spec of a GPU that
    a Ray cluster offers for a placement; ``local_cpu``: this CPU's spec, with its C
    compiler (a :class:`BackendError` without one); ``kernel_hooks``: the Python callables of a
    user's kernel (``ktune.tune``), which no stored job holds."""

    read_recording: RecordingReader = _read_recording
    local_gpus: Callable[[], list[dict[str, Any]]] = field(default=_local_gpus)
    ray_gpu: Callable[[RayPlacement], dict[str, Any]] = field(default=_ray_gpu)
    local_cpu: Callable[[], dict[str, Any]] = field(default=_local_cpu)
    kernel_hooks: KernelHooks | None = None
