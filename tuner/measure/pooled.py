"""A backend whose measurements run in a :class:`~ktune.tuner.measure.pool.SlotPool` of workers.

What a worker cannot answer becomes a status, never an exception: a worker that dies (or whose
measurement code raises) is a ``runtime_error``, one that does not answer within the pool's
timeout a ``timeout``; either way the pool replaces it and the job goes on. A worker's answer
is a dict with ``status``, ``time_ms``, ``times_ms``, ``compile_ms``, ``bench_ms``, ``error``
and ``extra``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ktune.search_space.parameters import Config
from ktune.tuner.measure.base import Backend, Measurement, Status
from ktune.tuner.measure.pool import SlotPool, TaskResult

__all__ = ["PooledBackend"]


class PooledBackend(Backend):
    """Measures each config as one task of ``self.pool``; the device is the one ``self.spec``
    (the first worker's hello) names. Both are set by the subclass."""

    pool: SlotPool
    spec: dict[str, Any]
    #: the device name when the worker's spec has none
    unnamed: ClassVar[str] = "unknown GPU"

    @property
    def device_name(self) -> str:
        return str(self.spec.get("name", self.unnamed))

    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        return [
            self._measurement(c, r)
            for c, r in zip(configs, self.pool.map([dict(c) for c in configs]))
        ]

    def close(self) -> None:
        self.pool.close()

    def _measurement(self, config: Config, result: TaskResult) -> Measurement:
        if result.status == "timeout":
            return Measurement(
                dict(config), Status.TIMEOUT, cost_s=result.seconds, error=result.error
            )
        if result.status != "ok":  # crashed, or the measurement code raised
            return Measurement(
                dict(config), Status.RUNTIME_ERROR, cost_s=result.seconds, error=result.error
            )
        v: dict[str, Any] = result.value
        status = Status(v["status"])
        extra = dict(v.get("extra") or {})
        if result.restarted:
            extra["worker_restarted"] = True
        return Measurement(
            config=dict(config),
            status=status,
            time_ms=v.get("time_ms") if status is Status.OK else None,
            times_ms=tuple(v.get("times_ms") or ()),
            compile_ms=float(v.get("compile_ms", 0.0)),
            bench_ms=float(v.get("bench_ms", 0.0)),
            cost_s=result.seconds,
            error=str(v.get("error", "")),
            extra=extra,
        )
