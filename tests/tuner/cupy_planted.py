"""Planted measurement functions for the worker-pool tests: they crash, hang, raise or poison
their worker on demand. Kept apart from the tests so that a spawned worker imports little."""

from __future__ import annotations

import os
import time

from ktune.tuner.measure.pool import WorkerReply

FAKE_GPU = {
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
    """A measurement function whose task says how to misbehave."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def hello(self) -> dict:
        return {**FAKE_GPU, "slot": self.slot}

    def __call__(self, task: dict) -> object:
        mode = task.get("mode", "ok")
        if mode == "crash":
            os._exit(3)
        if mode == "hang":
            time.sleep(3600)
        if mode == "raise":
            raise RuntimeError("planted failure")
        result = {
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
    return Planted(slot)


def broken(slot: int) -> Planted:
    raise RuntimeError("CUDA driver version is insufficient")


class PlantedPerProcess(Planted):
    """A planted function whose GPU is named after its process: workers that are different
    GPUs."""

    def hello(self) -> dict:
        return {**FAKE_GPU, "name": f"Planted GPU {os.getpid()}"}


def planted_per_process(slot: int) -> PlantedPerProcess:
    return PlantedPerProcess(slot)
