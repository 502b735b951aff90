"""The device-spec embedding: a fixed-length numeric vector derived from a :class:`DeviceSpec`.

Every coordinate is ``(log2(quantity) - centre) / scale`` with fixed centres and scales (not
fitted to any data, so the same spec always embeds alike and a new GPU lands on the same
axes). Logs, because what matters between GPUs is ratios: twice the bandwidth is the same step
from 500 to 1000 GB/s as from 1000 to 2000. Centres sit near a mid-range GPU and scales span
roughly the catalog's range, so coordinates stay within about [-1, 1]. Besides the raw specs
there are three ratios that describe a GPU's balance (FLOP per byte of DRAM traffic, L2 and
registers per SM-lane) and a vendor flag.

A device without a spec (an unknown name) embeds as all zeros with the ``unknown`` flag set:
the model then falls back to what it learnt across devices. :func:`explain` says which spec
field moves which coordinate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ktune.cost_model.devices import DeviceSpec

__all__ = ["EMBEDDING_NAMES", "EMBEDDING_SIZE", "Coordinate", "embed", "explain", "spec_distance"]


@dataclass(frozen=True)
class Coordinate:
    name: str
    fields: tuple[str, ...]  # the DeviceSpec fields it is computed from
    quantity: Callable[[DeviceSpec], float]
    centre: float  # log2 of a mid-range value
    scale: float  # log2 span mapped to 1

    def value(self, spec: DeviceSpec) -> float:
        return (math.log2(self.quantity(spec)) - self.centre) / self.scale


# (spec field, a mid-range value, the log2 span mapped to 1): one coordinate each, named
# ``log_<field>`` without its unit suffix.
_RAW: tuple[tuple[str, float, float], ...] = (
    ("sm_count", 80, 2.0),
    ("fp32_lanes_per_sm", 90, 1.0),
    ("boost_clock_mhz", 1800, 1.0),
    ("peak_fp32_tflops", 25, 3.0),
    ("peak_fp16_tflops", 150, 3.0),
    ("memory_bandwidth_gbs", 900, 2.5),
    ("memory_gb", 32, 2.5),
    ("l2_cache_kib", 8192, 3.0),
    ("shared_memory_per_sm_kib", 100, 1.0),
    ("shared_memory_per_block_optin_kib", 96, 1.0),
    ("registers_per_sm", 65536, 1.0),
    ("registers_per_block", 65536, 1.0),
    ("max_threads_per_sm", 1536, 1.0),
    ("max_blocks_per_sm", 24, 1.0),
    ("max_threads_per_block", 1024, 1.0),
    ("warp_size", 45, 1.0),
)
_UNITS = ("_tflops", "_gbs", "_gb", "_kib", "_mhz")


def _raw(field: str, mid: float, span: float) -> Coordinate:
    name = field
    for unit in _UNITS:
        name = name.removesuffix(unit)
    return Coordinate(f"log_{name}", (field,), lambda s: getattr(s, field), math.log2(mid), span)


def _ratio(name: str, num: str, den: str, scale: float, mid: float, span: float) -> Coordinate:
    """``scale * spec.num / spec.den``: a balance between two specs."""
    return Coordinate(
        name, (num, den), lambda s: scale * getattr(s, num) / getattr(s, den), math.log2(mid), span
    )


_COORDINATES: tuple[Coordinate, ...] = tuple(_raw(*r) for r in _RAW) + (
    _ratio("log_flop_per_byte", "peak_fp32_tflops", "memory_bandwidth_gbs", 1e3, 30, 2.0),
    _ratio("log_l2_per_sm", "l2_cache_kib", "sm_count", 1.0, 100, 3.0),
    _ratio("log_registers_per_lane", "registers_per_sm", "fp32_lanes_per_sm", 1.0, 700, 1.0),
)

EMBEDDING_NAMES: tuple[str, ...] = tuple(c.name for c in _COORDINATES) + ("vendor_amd", "unknown")
EMBEDDING_SIZE = len(EMBEDDING_NAMES)


def embed(spec: DeviceSpec | None) -> np.ndarray:
    """The embedding of ``spec`` (float64, length :data:`EMBEDDING_SIZE`); ``None`` gives the
    spec-less embedding: zeros with the ``unknown`` flag at 1."""
    out = np.zeros(EMBEDDING_SIZE, dtype=np.float64)
    if spec is None:
        out[-1] = 1.0
        return out
    for i, coord in enumerate(_COORDINATES):
        out[i] = coord.value(spec)
    out[-2] = 1.0 if spec.vendor.strip().upper() == "AMD" else 0.0
    return out


def spec_distance(spec: DeviceSpec | None, other: DeviceSpec | None) -> float:
    """Euclidean distance of two devices' embeddings (``inf`` when either spec is unknown)."""
    if spec is None or other is None:
        return math.inf
    return float(np.linalg.norm(embed(spec) - embed(other)))


def explain(spec: DeviceSpec | None = None) -> list[dict[str, object]]:
    """One row per coordinate: its name, the spec fields that move it, the transform and, when
    ``spec`` is given, its value for that spec."""
    values = embed(spec) if spec is not None else None
    rows: list[dict[str, object]] = []
    for i, coord in enumerate(_COORDINATES):
        rows.append(
            {
                "coordinate": coord.name,
                "fields": coord.fields,
                "transform": f"(log2(x) - log2({2**coord.centre:.4g})) / {coord.scale:g}",
            }
        )
    rows.append({"coordinate": "vendor_amd", "fields": ("vendor",), "transform": "1 if AMD else 0"})
    rows.append({"coordinate": "unknown", "fields": (), "transform": "1 when no spec is known"})
    if values is not None:
        for row, v in zip(rows, values):
            row["value"] = float(v)
    return rows
