"""``reduction``: sum or max of each row of x[ROWS][COLS] (fp32 result); shape ``ROWSxCOLS``.

The workload's layout names the reduction: ``sum`` (the default) or ``max``
(``reduction/1024x4096/float32/max``). The template is ``cuda/reduction.cu``; ROWS and COLS
come at run time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ktune.search_space.operators.base import (
    Arguments,
    DeviceLimits,
    Fill,
    Geometry,
    KernelSource,
    Operator,
    Tolerance,
    ceil_div,
    param_range,
    template,
)
from ktune.search_space.operators.forms import ROWS_ALIGNED, ReductionForm
from ktune.search_space.operators.matmul import INT_LIMIT
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["Reduction"]

_PARAMS = [
    Parameter.of("block_size_x", param_range(4, 1024)),
    Parameter.of("block_size_y", param_range(1, 32)),
    Parameter.of("vector_width", [1, 2, 4, 8]),
    Parameter.of("items_per_thread", [1, 2, 4, 8]),
    Parameter.of("reduce_method", ["shuffle", "smem"]),
    Parameter.of("blocks_per_row", param_range(1, 64)),
]

_CONSTRAINTS = [
    "32 <= block_size_x * block_size_y <= max_threads",
    "vector_width * elem_bytes <= 16",
    ROWS_ALIGNED,
    "block_size_x * vector_width <= max(COLS, 32)",
    (
        "blocks_per_row == 1"
        " or blocks_per_row * block_size_x * vector_width * items_per_thread <= COLS"
    ),
]


class Reduction(ReductionForm, Operator):
    summary = "sum or max over the last axis (layout names it); shuffles or a shared-memory tree"
    admits = (f"1 <= ROWS <= {INT_LIMIT}", f"1 <= COLS <= {INT_LIMIT}")

    def default_config(self, workload: Workload) -> Config:
        self.check(workload)
        return {
            "block_size_x": 128,
            "block_size_y": 1,
            "vector_width": 1,
            "items_per_thread": 4,
            "reduce_method": "shuffle",
            "blocks_per_row": 1,
        }

    def pointer_ctypes(self, workload: Workload) -> tuple[str, ...]:
        """x in the workload's dtype; the sums or maxima in float."""
        return (super().pointer_ctypes(workload)[0], "float")

    def geometry(self, workload: Workload) -> Geometry:
        return Geometry(
            ("(ROWS + block_size_y - 1) // block_size_y", "blocks_per_row", "1"),
            ("block_size_x", "block_size_y", "1"),
        )

    def fills(self, config: Config, workload: Workload) -> tuple[Fill, ...]:
        """Rows split over blocks combine atomically into out, which starts at the identity."""
        if int(config["blocks_per_row"]) == 1:
            return ()
        return (Fill("out", "ROWS", "float", -math.inf if workload.layout == "max" else 0.0),)

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        return self.matrix_space(workload, limits, _PARAMS, _CONSTRAINTS)

    def render(self, config: Config, workload: Workload) -> KernelSource:
        self.check(workload)
        params = {k: v for k, v in config.items() if k != "reduce_method"}
        defines = {
            "KERNEL_NAME": f"reduce_{workload.layout}_{workload.dtype}",
            "ELEM_T": "float" if workload.dtype == "float32" else "half_t",
            "OP_MAX": int(workload.layout == "max"),
            "USE_SHUFFLE": int(config["reduce_method"] == "shuffle"),
            **params,
        }
        return KernelSource(
            str(defines["KERNEL_NAME"]), template("prelude.cuh") + template("reduction.cu"), defines
        )

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        rows, cols = workload.shape
        x = rng.uniform(-1, 1, (rows, cols)).astype(self.np_dtype(workload))
        init = -np.inf if workload.layout == "max" else 0.0
        return Arguments((x, np.full(rows, init, dtype=np.float32)), outputs=(1,))

    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        x = xp.asarray(args.values[0]).astype(xp.float64)
        return [x.max(axis=1) if workload.layout == "max" else x.sum(axis=1)]

    def tolerance(self, workload: Workload) -> Tolerance:
        return Tolerance(0.0, 0.0) if workload.layout == "max" else Tolerance(1e-4, 1e-4)

    def flops(self, workload: Workload) -> float:
        rows, cols = workload.shape
        return float(rows * cols)

    def bytes_moved(self, workload: Workload) -> float:
        rows, cols = workload.shape
        return float(rows * cols * self.item_bytes(workload) + rows * 4)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        cols = workload.shape[1]
        c: dict[str, Any] = dict(config)
        per_thread = cols / (c["blocks_per_row"] * c["block_size_x"])
        return {
            **super().derived_features(config, workload),
            "elements_per_thread": per_thread,
            "loads_in_flight": float(c["items_per_thread"] * c["vector_width"]),
            "load_bytes": float(c["vector_width"] * self.item_bytes(workload)),
            "shuffle": float(c["reduce_method"] == "shuffle"),
            "atomics_per_row": float(c["blocks_per_row"] if c["blocks_per_row"] > 1 else 0),
        }

    def coverage(self, config: Config, workload: Workload) -> np.ndarray:
        """How often each input element is read into a row's result (all ones: exact)."""
        rows, cols = workload.shape
        c: dict[str, Any] = dict(config)
        bx, by, vw, ipt, bpr = (
            c[k]
            for k in (
                "block_size_x",
                "block_size_y",
                "vector_width",
                "items_per_thread",
                "blocks_per_row",
            )
        )
        step = bx * vw
        chunk = ceil_div(ceil_div(cols, bpr), vw) * vw
        counts = np.zeros((rows, cols), dtype=np.int32)
        for split in range(bpr):
            c0, c1 = split * chunk, min(cols, split * chunk + chunk)
            for tx in range(bx):
                starts = np.arange(c0 + tx * vw, max(c1, c0 + tx * vw), step * ipt)
                first = (starts[:, None] + np.arange(ipt)[None, :] * step).ravel()
                first = first[first < c1]
                elems = (first[:, None] + np.arange(vw)[None, :]).ravel()
                counts[:, elems] += 1
        rows_done = (np.arange(ceil_div(rows, by))[:, None] * by + np.arange(by)[None, :]).ravel()
        mask = np.zeros(rows, dtype=np.int32)
        np.add.at(mask, rows_done[rows_done < rows], 1)
        return counts * mask[:, None]
