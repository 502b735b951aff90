"""A synthetic space with a known cost function of its knobs, and samples of it on any device
of the catalog: data on which a cost model's ranking can be checked against the truth."""

from __future__ import annotations

import math

import numpy as np

from ktune.cost_model.devices import DeviceSpec, default_catalog
from ktune.cost_model.samples import Sample
from ktune.search_space import Parameter, SearchSpace, Workload


def synthetic_space() -> SearchSpace:
    """Block sizes, a tile size and an unroll flag: 240 cartesian points, 228 valid."""
    return SearchSpace(
        [
            Parameter.of("block_size_x", [16, 32, 64, 128, 256]),
            Parameter.of("block_size_y", [1, 2, 4, 8]),
            Parameter.of("tile_size_x", [1, 2, 3, 4, 5, 6]),
            Parameter.of("unroll", [0, 1]),
        ],
        ["block_size_x * block_size_y <= 1024"],
        name="synthetic",
    )


def synthetic_time(space: SearchSpace, spec: DeviceSpec) -> np.ndarray:
    """A known cost function of the knobs: best at 8 warps per block (bx * by), tile 4,
    unroll 1, and among the 8-warp blocks a 64-wide one, so the optimum is unique; it depends
    on the device through its warp size."""
    x = space.encode()
    threads = x[:, 0] * x[:, 1]
    t = (np.log2(threads) - math.log2(spec.warp_size * 8)) ** 2 + 0.5 * (x[:, 2] - 4) ** 2
    t += 0.3 * (1 - x[:, 3]) + 0.2 * (np.log2(x[:, 0]) - 6) ** 2
    return 1.0 + t


def samples_of(space: SearchSpace, device: str, idx: np.ndarray | None = None) -> list[Sample]:
    """Samples of ``space`` (its configs ``idx``, all by default) on the catalog's ``device``,
    timed by :func:`synthetic_time`."""
    spec = default_catalog().get(device)
    assert spec is not None
    times = synthetic_time(space, spec)
    idx = np.arange(len(space)) if idx is None else idx
    wl = Workload("synthetic", (4096, 4096))
    return [
        Sample(c, wl, spec.name, spec, "ok", float(times[i]))
        for c, i in zip(space.configs(idx), idx)
    ]
