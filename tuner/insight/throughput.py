"""The work of one run of a job's workload, so a time becomes a rate.

``GFLOP/s = flops / (time_ms * 1e6)`` and ``GB/s = bytes / (time_ms * 1e6)``, with ``flops``
and ``bytes`` the operator's own count (``Operator.flops`` and ``bytes_moved``: useful
floating-point operations, and compulsory DRAM traffic with each input read and each output
written once). Workloads of recorded spaces (Kernel Tuner caches) name no operator of ktune's:
their work is not known, and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Work", "rate", "work_of"]


@dataclass(frozen=True)
class Work:
    """Floating-point operations and bytes of one run (None when not known, with why)."""

    operator: str
    flops: float | None
    bytes: float | None
    reason: str = ""
    dtype: str = ""


def work_of(workload_key: str) -> Work:
    """The work of one run of the workload keyed ``workload_key``."""
    from ktune.search_space.operators import OperatorError, cpu, get
    from ktune.search_space.workload import Workload, WorkloadError

    try:
        workload = Workload.from_key(workload_key)
    except WorkloadError as exc:
        return Work("", None, None, str(exc))
    name = workload.operator
    try:
        op = cpu.get(name) if name in cpu.names() else get(name)
        flops, moved = float(op.flops(workload)), float(op.bytes_moved(workload))
        return Work(name, flops, moved, dtype=workload.dtype)
    except OperatorError:
        return Work(name, None, None, f"{name!r} is not an operator of ktune: its work is unknown")
    except (ValueError, TypeError) as exc:  # a shape the operator does not take
        return Work(name, None, None, f"{name}: {exc}")


def rate(amount: float | None, time_ms: float | None) -> float | None:
    """``amount`` per second in units of 1e9 (GFLOP/s, GB/s) at ``time_ms``; None if unknown."""
    if amount is None or time_ms is None or time_ms <= 0:
        return None
    return amount / (time_ms * 1e6)
