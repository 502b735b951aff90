"""The problem C = A @ B (shape ``MxNxK``, row-major) that the GPU and the CPU matmul kernels
solve: its inputs, its float64 reference, and its FLOPs and bytes. Mixed into both operators."""

from __future__ import annotations

from typing import Any

import numpy as np

from ktune.search_space.operators.base import Arguments, ShapedOperator
from ktune.search_space.operators.forms import GemmForm
from ktune.search_space.workload import Workload

__all__ = ["GemmProblem"]


class GemmProblem(GemmForm, ShapedOperator):
    """A @ B with A of MxK and B of KxN; the output C (MxN) is argument 2."""

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        m, n, k = workload.shape
        dt = self.np_dtype(workload)
        a = rng.uniform(-1, 1, (m, k)).astype(dt)
        b = rng.uniform(-1, 1, (k, n)).astype(dt)
        return Arguments((a, b, np.zeros((m, n), dtype=dt)), outputs=(2,))

    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        """C in float64, with ``xp`` (numpy, or cupy on a GPU)."""
        a, b = (xp.asarray(v).astype(xp.float64) for v in args.values[:2])
        return [a @ b]

    def flops(self, workload: Workload) -> float:
        m, n, k = workload.shape
        return 2.0 * m * n * k

    def bytes_moved(self, workload: Workload) -> float:
        m, n, k = workload.shape
        return float((m * k + k * n + m * n) * self.item_bytes(workload))
