"""``softmax``: row-wise softmax of x[ROWS][COLS]; shape ``ROWSxCOLS``; output in the input dtype.

``method`` is ``online`` (one sweep for max and sum) or ``twopass``; ``cache_items`` > 0 keeps
the row in registers (that many vectors per thread) so x is read once, where the row fits, and
streams it otherwise. Template: ``cuda/softmax.cu``; ROWS and COLS come at run time.
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
    ceil_div,
    param_range,
    template,
)
from ktune.search_space.operators.forms import ROWS_ALIGNED, SoftmaxForm
from ktune.search_space.operators.matmul import INT_LIMIT
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["Softmax"]

_PARAMS = [
    Parameter.of("block_size_x", param_range(16, 1024)),
    Parameter.of("block_size_y", param_range(1, 16)),
    Parameter.of("vector_width", [1, 2, 4, 8]),
    Parameter.of("method", ["online", "twopass"]),
    Parameter.of("cache_items", [0, 1, 2, 4, 8, 16]),
]

_CONSTRAINTS = [
    "32 <= block_size_x * block_size_y <= max_threads",
    "vector_width * elem_bytes <= 16",
    ROWS_ALIGNED,
    "block_size_x * vector_width <= max(COLS, 32)",
    # cache the row only where it fits, in the fewest items that hold it
    (
        "cache_items == 0 or (COLS <= cache_items * block_size_x * vector_width"
        " and (cache_items == 1 or 2 * COLS > cache_items * block_size_x * vector_width))"
    ),
]


class Softmax(SoftmaxForm, Operator):
    summary = "row-wise softmax; online or two-pass, row cached in registers or not"
    admits = (f"1 <= ROWS <= {INT_LIMIT}", f"1 <= COLS <= {INT_LIMIT}")

    def default_config(self, workload: Workload) -> Config:
        self.check(workload)
        return {
            "block_size_x": 128,
            "block_size_y": 1,
            "vector_width": 1,
            "method": "online",
            "cache_items": 0,
        }

    def geometry(self, workload: Workload) -> Geometry:
        return Geometry(
            ("(ROWS + block_size_y - 1) // block_size_y", "1", "1"),
            ("block_size_x", "block_size_y", "1"),
        )

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        return self.matrix_space(workload, limits, _PARAMS, _CONSTRAINTS)

    def render(self, config: Config, workload: Workload) -> KernelSource:
        self.check(workload)
        c: dict[str, Any] = dict(config)
        defines = {
            "KERNEL_NAME": f"softmax_{workload.dtype}",
            "ELEM_T": "float" if workload.dtype == "float32" else "half_t",
            "ONLINE": int(c["method"] == "online"),
            **{k: v for k, v in c.items() if k != "method"},
        }
        return KernelSource(
            str(defines["KERNEL_NAME"]), template("prelude.cuh") + template("softmax.cu"), defines
        )

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        rows, cols = workload.shape
        dt = self.np_dtype(workload)
        x = rng.uniform(-4, 4, (rows, cols)).astype(dt)
        return Arguments((x, np.zeros((rows, cols), dtype=dt)), outputs=(1,))

    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        x = xp.asarray(args.values[0]).astype(xp.float64)
        e = xp.exp(x - x.max(axis=1, keepdims=True))
        return [e / e.sum(axis=1, keepdims=True)]

    def flops(self, workload: Workload) -> float:
        rows, cols = workload.shape
        return 5.0 * rows * cols  # max, subtract, exp, sum, scale

    def bytes_moved(self, workload: Workload) -> float:
        rows, cols = workload.shape
        return 2.0 * rows * cols * self.item_bytes(workload)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        _, cols = workload.shape
        c: dict[str, Any] = dict(config)
        cached = 0 < _cols_cached(c, cols)
        sweeps = 1 if cached else (2 if c["method"] == "online" else 3)
        return {
            **super().derived_features(config, workload),
            "elements_per_thread": cols / c["block_size_x"],
            "load_bytes": float(c["vector_width"] * self.item_bytes(workload)),
            "input_sweeps": float(sweeps),
            "online": float(c["method"] == "online"),
        }

    def coverage(self, config: Config, workload: Workload) -> np.ndarray:
        """How often each output element is written."""
        rows, cols = workload.shape
        c: dict[str, Any] = dict(config)
        bx, by, vw = c["block_size_x"], c["block_size_y"], c["vector_width"]
        counts = np.zeros((rows, cols), dtype=np.int32)
        row_ids = (np.arange(ceil_div(rows, by))[:, None] * by + np.arange(by)[None, :]).ravel()
        row_ids = row_ids[row_ids < rows]
        step = bx * vw
        if _cols_cached(c, cols):
            items = c["cache_items"]
            starts = (np.arange(bx)[:, None] * vw + np.arange(items)[None, :] * step).ravel()
        else:
            starts = np.concatenate([np.arange(tx * vw, cols, step) for tx in range(bx)])
        starts = starts[starts < cols]
        elems = (starts[:, None] + np.arange(vw)[None, :]).ravel()
        for r in row_ids:
            np.add.at(counts[r], elems, 1)
        return counts


def _cols_cached(c: dict[str, Any], cols: int) -> int:
    """The vectors per thread the kernel caches at ``cols`` (0: it streams the row)."""
    items = int(c["cache_items"])
    return items if items and cols <= items * c["block_size_x"] * c["vector_width"] else 0
