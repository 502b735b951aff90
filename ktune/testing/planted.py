"""Planted measurement functions for the worker pools (local processes, Ray actors): they
crash, hang, raise or poison their worker on demand, on a made-up GPU. A spawned worker
unpickles them by name, so this module imports little."""

from __future__ import annotations

import os
import time
from typing import Any

from ktune.tuner.measure.pool import WorkerReply

__all__ = [
    "FAKE_GPU",
    "Planted",
    "PlantedPerProcess",
    "broken",
    "planted",
    "planted_per_process",
]

#: what the planted worker says about its GPU (an A100-like device named "Planted GPU")
FAKE_GPU: dict[str, Any] = {
    "name": "Planted GPU",
    "vendor": "NVIDIA",
    "architecture": "Ampere",
    "compute_capability": "8.0",
    "max_threads_per_block": 1024,
    "shared_memory_per_block_kib": 48,
    "shared_memory_per_block_optin_kib": 163,
    "registers_per_block": 65536,
    "warp_size": 32,
    "cuda_driver": 13000,
}


class Planted:
    """A measurement function whose task says how to misbehave: ``mode`` is ``ok`` (the
    default: ``time_ms`` is the task's ``x``), ``crash`` (the process exits), ``hang``,
    ``raise``, ``wrong`` (a wrong result) or ``sticky`` (a result that asks for a restart)."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def hello(self) -> dict[str, Any]:
        return {**FAKE_GPU, "slot": self.slot}

    def __call__(self, task: dict[str, Any]) -> object:
        mode = task.get("mode", "ok")
        if mode == "crash":
            os._exit(3)
        if mode == "hang":
            time.sleep(3600)
        if mode == "raise":
            raise RuntimeError("planted failure")
        result: dict[str, Any] = {
            "status": "ok",
            "time_ms": float(task.get("x", 1)),
            "times_ms": [float(task.get("x", 1))] * 3,
            "compile_ms": 5.0,
            "bench_ms": 1.0,
            "error": "",
            "extra": {"pid": os.getpid()},
        }
        if mode == "wrong":
            result.update(status="wrong_result", time_ms=None, error="output differs")
        if mode == "sticky":
            result.update(status="runtime_error", time_ms=None, error="CUDA_ERROR_ILLEGAL_ADDRESS")
            return WorkerReply(result, restart=True)
        return result


def planted(slot: int) -> Planted:
    """The worker factory of a pool of planted functions."""
    return Planted(slot)


def broken(slot: int) -> Planted:
    """A worker factory that fails as a machine without a usable CUDA driver does."""
    raise RuntimeError("CUDA driver version is insufficient")


class PlantedPerProcess(Planted):
    """A planted function whose GPU is named after its process: workers that are different
    GPUs."""

    def hello(self) -> dict[str, Any]:
        return {**FAKE_GPU, "name": f"Planted GPU {os.getpid()}"}


def planted_per_process(slot: int) -> PlantedPerProcess:
    """The worker factory of a pool whose every worker is a GPU of its own."""
    return PlantedPerProcess(slot)
