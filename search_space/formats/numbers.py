"""Numbers read from recordings and specs: JSON allows what a float cannot hold."""

from __future__ import annotations

import math

__all__ = ["finite_float"]


def finite_float(value: float) -> float | None:
    """``value`` as a float, or ``None`` for NaN, infinities and ints beyond the float range."""
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None
