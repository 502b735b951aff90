"""``cpu_conv2d``: 2-D convolution on the CPU, NCHW (weights KCRS), with stride, padding and
dilation; the problem and its workloads are :class:`ConvProblem`'s, as for the GPU ``conv2d``.

A direct convolution: blocking of output channels, rows and columns and of the input
channels, a register block of ``micro_k`` output channels x ``micro_q`` output columns that the
compiler vectorises, the filter-width loop's unroll factor, and OpenMP threads over (image,
channel block) pairs. Template: ``c/conv2d.c``.
"""

from __future__ import annotations

from ktune.search_space.operators.base import param_range
from ktune.search_space.operators.conv_problem import ConvProblem
from ktune.search_space.operators.cpu.base import (
    C_TYPES,
    CpuLimits,
    CpuOperator,
    CSource,
    c_template,
)
from ktune.search_space.operators.forms import CpuConv2dForm
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["CpuConv2d"]

_CONSTRAINTS = [
    # a block no larger than the smallest power of two covering its dimension
    "tile_k // 2 < K",
    "tile_p // 2 < P",
    "tile_q // 2 < Q",
    "tile_c // 2 < C",
    "micro_k <= tile_k",
    "micro_q <= tile_q",
    "micro_k // 2 < K",
    "micro_q // 2 < Q",
    # the accumulators of a register block fit in the vector registers
    "micro_k * micro_q * elem_bytes <= register_bytes",
    "unroll_s // 2 < S",
    # no thread without an (image, channel block) pair to compute
    "threads <= cores",
    "threads <= N * ((K + tile_k - 1) // tile_k)",
]


_KNOBS = ("tile_k", "tile_p", "tile_q", "tile_c", "micro_k", "micro_q", "unroll_s", "threads")


class CpuConv2d(CpuConv2dForm, ConvProblem, CpuOperator):
    summary = (
        "direct 2-D convolution in C, NCHW: channel, row and column blocks, a register block, "
        "OpenMP threads"
    )

    def space(self, workload: Workload, limits: CpuLimits) -> SearchSpace:
        cs, _ = self.conv_shape(workload)
        parameters = [
            Parameter.of("tile_k", param_range(1, 128)),
            Parameter.of("tile_p", param_range(1, 64)),
            Parameter.of("tile_q", param_range(4, 128)),
            Parameter.of("tile_c", param_range(1, 256)),
            Parameter.of("micro_k", [1, 2, 4, 8]),
            Parameter.of("micro_q", [1, 4, 8, 16, 32]),
            Parameter.of("unroll_s", [1, 2, 4]),
            Parameter.of("threads", sorted({*param_range(1, limits.cores), limits.cores})),
        ]
        constants = {
            **limits.constants(),
            "N": cs.n,
            "K": cs.k,
            "C": cs.c,
            "P": cs.p,
            "Q": cs.q,
            "S": cs.s,
            "elem_bytes": self.item_bytes(workload),
        }
        return SearchSpace(parameters, _CONSTRAINTS, constants=constants, name=workload.key)

    def render(self, config: Config, workload: Workload, *, specialise: bool = False) -> CSource:
        self.conv_shape(workload)
        defines = {name.upper(): config[name] for name in _KNOBS}
        if specialise:
            defines["KT_FIXED"] = 1
            defines |= {
                f"KT_FIXED_{d}": v for d, v in zip(self.entry.sizes, self.entry_sizes(workload))
            }
        defines |= {"REAL": C_TYPES[workload.dtype], "KERNEL_NAME": "ktune_conv2d"}
        return CSource("ktune_conv2d", c_template("conv2d.c"), defines)

    def default_config(self, workload: Workload) -> Config:
        """Small blocks, a 4x8 register block, one thread: computes every convolution."""
        return {
            "tile_k": 16,
            "tile_p": 8,
            "tile_q": 32,
            "tile_c": 32,
            "micro_k": 4,
            "micro_q": 8,
            "unroll_s": 1,
            "threads": 1,
        }
