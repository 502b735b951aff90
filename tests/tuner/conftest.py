"""Fixtures for tuner tests: a real recorded space and small synthetic ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace
from ktune.tuner.sources import ReplaySource, bundled_recordings

RECORDED = Path(__file__).resolve().parents[2] / "search_space" / "recorded"


@pytest.fixture(scope="session")
def pnpoly() -> ReplaySource:
    """The bundled pnpoly recording (RTX 3090): 4092 configs, some failing at run time."""
    return ReplaySource.open(bundled_recordings()["pnpoly_RTX_3090"])


@pytest.fixture(scope="session")
def convolution() -> ReplaySource:
    return ReplaySource.open(bundled_recordings()["convolution_A4000"])


@pytest.fixture
def small_space() -> SearchSpace:
    """36 cartesian points, 21 valid under the constraint."""
    return SearchSpace(
        [Parameter.of("bx", [1, 2, 4, 8, 16, 32]), Parameter.of("by", [1, 2, 4, 8, 16, 32])],
        ["bx * by <= 64"],
    )


def quadratic_time(config: dict) -> float:
    """A smooth objective with its minimum at bx=8, by=4 (for convergence tests)."""
    import math

    return 1.0 + (math.log2(config["bx"]) - 3) ** 2 + (math.log2(config["by"]) - 2) ** 2
