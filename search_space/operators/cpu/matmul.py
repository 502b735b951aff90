"""``cpu_matmul``: C = A @ B on the CPU; shape ``MxNxK`` (A is MxK, B is KxN, row-major).

Cache blocking (``tile_i/j/k``), a register block of C (``micro_i`` x ``micro_j``) that the
compiler vectorises, the reduction's unroll factor, an optional copy of B's panel to a
contiguous buffer, and OpenMP threads over row blocks. Template: ``c/matmul.c``.
"""

from __future__ import annotations

from ktune.search_space.operators.base import param_range
from ktune.search_space.operators.cpu.base import (
    C_TYPES,
    CpuLimits,
    CpuOperator,
    CSource,
    c_template,
)
from ktune.search_space.operators.forms import CpuMatmulForm
from ktune.search_space.operators.gemm import GemmProblem
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["CpuMatmul"]

_CONSTRAINTS = [
    # a tile or block no larger than the smallest power of two covering its dimension
    "tile_i // 2 < M",
    "tile_j // 2 < N",
    "tile_k // 2 < K",
    "micro_i <= tile_i",
    "micro_j <= tile_j",
    "micro_i // 2 < M",
    "micro_j // 2 < N",
    # the accumulators of a register block fit in the vector registers
    "micro_i * micro_j * elem_bytes <= register_bytes",
    "unroll_k <= tile_k",
    # no thread without a row block to compute
    "threads <= cores",
    "threads <= (M + tile_i - 1) // tile_i",
]


_KNOBS = ("tile_i", "tile_j", "tile_k", "micro_i", "micro_j", "unroll_k", "pack_b", "threads")


class CpuMatmul(CpuMatmulForm, GemmProblem, CpuOperator):
    summary = (
        "matrix multiply in C: cache tiles, a register block of C, B panel packing, OpenMP threads"
    )

    def space(self, workload: Workload, limits: CpuLimits) -> SearchSpace:
        self.check(workload)
        m, n, k = workload.shape
        threads = sorted({*param_range(1, limits.cores), limits.cores})
        parameters = [
            Parameter.of("tile_i", param_range(8, 256)),
            Parameter.of("tile_j", param_range(16, 512)),
            Parameter.of("tile_k", param_range(16, 512)),
            Parameter.of("micro_i", [1, 2, 4, 8]),
            Parameter.of("micro_j", param_range(4, 64)),
            Parameter.of("unroll_k", [1, 2, 4, 8]),
            Parameter.of("pack_b", [0, 1]),
            Parameter.of("threads", threads),
        ]
        constants = {
            **limits.constants(),
            "M": m,
            "N": n,
            "K": k,
            "elem_bytes": self.item_bytes(workload),
        }
        return SearchSpace(parameters, _CONSTRAINTS, constants=constants, name=workload.key)

    def render(self, config: Config, workload: Workload, *, specialise: bool = False) -> CSource:
        self.check(workload)
        defines = {name.upper(): config[name] for name in _KNOBS}
        if specialise:
            defines |= {f"KT_FIXED_{d}": v for d, v in zip(self.dims, workload.shape)}
        defines |= {"REAL": C_TYPES[workload.dtype], "KERNEL_NAME": "ktune_matmul"}
        return CSource("ktune_matmul", c_template("matmul.c"), defines)

    def default_config(self, workload: Workload) -> Config:
        """Moderate cache tiles, a 4x8 register block, one thread: no constraint of a space
        depends on it being valid, and it is never far off at small and middling sizes."""
        return {
            "tile_i": 64,
            "tile_j": 128,
            "tile_k": 128,
            "micro_i": 4,
            "micro_j": 8,
            "unroll_k": 1,
            "pack_b": 0,
            "threads": 1,
        }
