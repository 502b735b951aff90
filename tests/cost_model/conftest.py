"""Fixtures of the cost-model tests: the bundled recordings and a synthetic space."""

from __future__ import annotations

import pytest

from ktune.search_space import SearchSpace
from ktune.search_space.formats import RecordedSpace, load_cache
from ktune.testing.recordings import CONV, PNPOLY, recording
from tests.cost_model import synthetic


@pytest.fixture(scope="session")
def convolution() -> RecordedSpace:
    return load_cache(recording(CONV))


@pytest.fixture(scope="session")
def pnpoly() -> RecordedSpace:
    return load_cache(recording(PNPOLY))


@pytest.fixture(scope="session")
def synthetic_space() -> SearchSpace:
    return synthetic.synthetic_space()
