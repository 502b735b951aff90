"""A trial's rates against what its device can do: the fraction of the device's peak.

The peak comes from the device's spec as the log knows it (``ktune.cost_model.devices.resolve``:
a complete spec stored with the device, e.g. by a CuPy worker, else the shipped catalog by
name): ``peak_fp32_tflops`` for float32 workloads, ``peak_fp16_tflops`` (dense tensor-core
rate) for float16, and ``memory_bandwidth_gbs`` for every dtype. Devices the catalog does not
know (CPUs, recorded GPUs outside it) and dtypes without a listed peak (float64) have none,
and the answer says why. Fractions are of the theoretical peak: a memory-bound kernel is
judged by its bandwidth fraction, a compute-bound one by its FLOP/s fraction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ktune.tuner.insight.throughput import Work, rate, work_of

__all__ = ["Peak", "Rates", "peak_of", "rates", "work_and_peak"]


@dataclass(frozen=True)
class Peak:
    """A device's peak GFLOP/s for one dtype and its peak GB/s (None when unknown, with why)."""

    gflops: float | None
    gbps: float | None
    reason: str = ""


@dataclass(frozen=True)
class Rates:
    """One trial's GFLOP/s and GB/s, and their fractions of the device's peak (None:
    unknown)."""

    gflops: float | None
    gbps: float | None
    flops_fraction: float | None
    bandwidth_fraction: float | None


def peak_of(device: str, stored: Mapping[str, Any] | None, dtype: str) -> Peak:
    """The peak rates of ``device`` (its spec as stored in the log: ``stored``) for ``dtype``."""
    from ktune.cost_model.devices import resolve

    spec = resolve(device, stored)
    if spec is None:
        return Peak(None, None, f"no peak rates known for {device}")
    tflops = {"float32": spec.peak_fp32_tflops, "float16": spec.peak_fp16_tflops}.get(dtype)
    gflops = tflops * 1e3 if tflops else None
    gbps = spec.memory_bandwidth_gbs or None
    reason = "" if gflops else f"no peak {dtype or 'FLOP/s'} rate known for {device}"
    return Peak(gflops, gbps, reason)


def work_and_peak(
    workload_key: str, device: str, stored: Mapping[str, Any] | None
) -> tuple[Work, Peak]:
    """The work of one run of a workload and the peak of the device it ran on (a job's)."""
    work = work_of(workload_key)
    if work.flops is None and work.bytes is None:
        return work, Peak(None, None, work.reason)
    return work, peak_of(device, stored, work.dtype)


def rates(work: Work, peak: Peak, time_ms: float | None) -> Rates:
    """The rates of one run of ``work`` taking ``time_ms``, against ``peak``."""
    gflops, gbps = rate(work.flops, time_ms), rate(work.bytes, time_ms)
    return Rates(gflops, gbps, _fraction(gflops, peak.gflops), _fraction(gbps, peak.gbps))


def _fraction(value: float | None, peak: float | None) -> float | None:
    return None if value is None or not peak else value / peak
