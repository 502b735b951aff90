"""Fixtures for tuner tests: the bundled recordings and a small synthetic space."""

from __future__ import annotations

import pytest

from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace
from ktune.testing.recordings import CONV, PNPOLY, recording
from ktune.tuner.sources import ReplaySource


@pytest.fixture(scope="session")
def pnpoly() -> ReplaySource:
    """The bundled pnpoly recording (RTX 3090): 4092 configs, some failing at run time."""
    return ReplaySource.open(recording(PNPOLY))


@pytest.fixture(scope="session")
def convolution() -> ReplaySource:
    return ReplaySource.open(recording(CONV))


@pytest.fixture
def small_space() -> SearchSpace:
    """36 cartesian points, 21 valid under the constraint."""
    return SearchSpace(
        [Parameter.of("bx", [1, 2, 4, 8, 16, 32]), Parameter.of("by", [1, 2, 4, 8, 16, 32])],
        ["bx * by <= 64"],
    )
