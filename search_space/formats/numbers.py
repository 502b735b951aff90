"""Numbers read from recordings and specs: JSON allows what a float cannot hold."""

from __future__ import annotations

import math

__all__ = ["MS_PER_UNIT", "finite_float"]

#: a unit of time, as recording formats name it (lower case) -> milliseconds per unit (Kernel
#: Tuner writes "miliseconds")
MS_PER_UNIT = {
    "milliseconds": 1.0,
    "miliseconds": 1.0,
    "millisecond": 1.0,
    "ms": 1.0,
    "seconds": 1e3,
    "second": 1e3,
    "s": 1e3,
    "microseconds": 1e-3,
    "microsecond": 1e-3,
    "us": 1e-3,
    "nanoseconds": 1e-6,
    "nanosecond": 1e-6,
    "ns": 1e-6,
}


def finite_float(value: float) -> float | None:
    """``value`` as a float, or ``None`` for NaN, infinities and ints beyond the float range."""
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None
