"""Objectives with a known optimum for the tuner's loop and strategy tests."""

from __future__ import annotations

import math
from typing import Any


def quadratic_time(config: dict[str, Any]) -> float:
    """A smooth objective of knobs ``bx`` and ``by`` with its minimum, 1.0, at bx=8, by=4 (for
    convergence tests)."""
    return 1.0 + (math.log2(config["bx"]) - 3) ** 2 + (math.log2(config["by"]) - 2) ** 2
