"""``transpose``: y[COLS][ROWS] = x[ROWS][COLS]^T; shape ``ROWSxCOLS``.

Square shared-memory tiles with padded rows against bank conflicts and vector accesses on both
sides. Template: ``cuda/transpose.cu``; ROWS and COLS come at run time, and the grid is
one-dimensional (tiles in row-major order), so any shape fits its limits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ktune.search_space.operators.base import (
    Arguments,
    DeviceLimits,
    Geometry,
    KernelSource,
    Operator,
    Tolerance,
    ceil_div,
    param_range,
    template,
)
from ktune.search_space.operators.forms import TransposeForm
from ktune.search_space.operators.matmul import INT_LIMIT
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["Transpose"]

_PARAMS = [
    Parameter.of("tile_size_x", [16, 32, 64]),
    Parameter.of("block_size_x", param_range(2, 64)),
    Parameter.of("block_size_y", param_range(1, 32)),
    Parameter.of("padding", [0, 1, 2]),
    Parameter.of("vector_width", [1, 2, 4, 8]),
]

_CONSTRAINTS = [
    "block_size_x * vector_width == tile_size_x",
    "block_size_y <= tile_size_x",
    "32 <= block_size_x * block_size_y <= max_threads",
    "vector_width * elem_bytes <= 16",
    *TransposeForm.requirements,
    "tile_size_x * (tile_size_x + padding) * elem_bytes <= max_static_smem",
]


class Transpose(TransposeForm, Operator):
    summary = "2-D transpose through padded shared-memory tiles, vector loads and stores"
    admits = (f"1 <= ROWS <= {INT_LIMIT}", f"1 <= COLS <= {INT_LIMIT}")

    def default_config(self, workload: Workload) -> Config:
        self.check(workload)
        return {
            "tile_size_x": 32,
            "block_size_x": 32,
            "block_size_y": 8,
            "padding": 1,
            "vector_width": 1,
        }

    def geometry(self, workload: Workload) -> Geometry:
        tiles = (
            "((ROWS + tile_size_x - 1) // tile_size_x) * ((COLS + tile_size_x - 1) // tile_size_x)"
        )
        return Geometry((tiles, "1", "1"), ("block_size_x", "block_size_y", "1"))

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        return self.matrix_space(workload, limits, _PARAMS, _CONSTRAINTS)

    def render(self, config: Config, workload: Workload) -> KernelSource:
        self.check(workload)
        defines = {
            "KERNEL_NAME": f"transpose_{workload.dtype}",
            "ELEM_T": "float" if workload.dtype == "float32" else "half_t",
            **config,
        }
        return KernelSource(
            str(defines["KERNEL_NAME"]), template("prelude.cuh") + template("transpose.cu"), defines
        )

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        rows, cols = workload.shape
        dt = self.np_dtype(workload)
        x = rng.uniform(-1, 1, (rows, cols)).astype(dt)
        return Arguments((x, np.zeros((cols, rows), dtype=dt)), outputs=(1,))

    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        return [xp.ascontiguousarray(xp.asarray(args.values[0]).astype(xp.float64).T)]

    def tolerance(self, workload: Workload) -> Tolerance:
        return Tolerance(0.0, 0.0)

    def flops(self, workload: Workload) -> float:
        return 0.0

    def bytes_moved(self, workload: Workload) -> float:
        rows, cols = workload.shape
        return 2.0 * rows * cols * self.item_bytes(workload)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        c: dict[str, Any] = dict(config)
        return {
            **super().derived_features(config, workload),
            "tile_elements": float(c["tile_size_x"] ** 2),
            "elements_per_thread": c["tile_size_x"] ** 2 / (c["block_size_x"] * c["block_size_y"]),
            "access_bytes": float(c["vector_width"] * self.item_bytes(workload)),
            "padding": float(c["padding"]),
        }

    def coverage(self, config: Config, workload: Workload) -> np.ndarray:
        """How often each output element y[c][r] is written from x[r][c] (all ones: exact)."""
        rows, cols = workload.shape
        c: dict[str, Any] = dict(config)
        t, bx, by, vw = c["tile_size_x"], c["block_size_x"], c["block_size_y"], c["vector_width"]
        counts = np.zeros((cols, rows), dtype=np.int32)
        col_tiles = ceil_div(cols, t)
        blocks = self.launch(config, workload).grid[0]
        tile_i = np.arange(0, t, 1)
        i_of_ty = [tile_i[ty::by] for ty in range(by)]
        for block in range(blocks):
            r0, c0 = (block // col_tiles) * t, (block % col_tiles) * t
            # the load phase reads x[r0 + i][c0 + tx*vw + e] into tile[i][tx*vw + e]
            loaded = np.zeros((t, t), dtype=bool)
            for ty in range(by):
                for tx in range(bx):
                    rr = i_of_ty[ty]
                    ok = (r0 + rr < rows) & (c0 + tx * vw < cols)
                    loaded[np.ix_(rr[ok], tx * vw + np.arange(vw))] = True
            # the store phase writes y[c0 + i][r0 + tx*vw + e] from tile[tx*vw + e][i]
            for ty in range(by):
                for tx in range(bx):
                    ii = i_of_ty[ty]
                    ii = ii[(c0 + ii < cols) & (r0 + tx * vw < rows)]
                    for e in range(vw):
                        src = tx * vw + e
                        good = loaded[src, ii]
                        np.add.at(counts, (c0 + ii[good], np.full(good.sum(), r0 + src)), 1)
        return counts
