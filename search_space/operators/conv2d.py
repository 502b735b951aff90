"""``conv2d``: 2-D convolution (cross-correlation, as in deep learning) as an implicit GEMM.

The problem (shapes, layouts NCHW and NHWC, stride, padding, dilation, the canonical workload)
is :class:`~ktune.search_space.operators.conv_problem.ConvProblem`'s. The kernel is the SIMT GEMM
core (``cuda/gemm_simt.cuh``) with loaders that gather the input window on the fly
(``cuda/conv2d_simt.cuh``). The 13 sizes (and the output's P, Q) come at run time.
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
    template,
)
from ktune.search_space.operators.conv_problem import ConvProblem, ConvShape
from ktune.search_space.operators.forms import CONV_SIZES, Conv2dForm
from ktune.search_space.operators.matmul import (
    INT_LIMIT,
    SIMT_CONSTRAINTS,
    simt_gemm_coverage,
    simt_geometry,
)
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["Conv2d", "ConvShape"]

_PARAMS = [
    Parameter.of("block_size_x", [8, 16, 32]),
    Parameter.of("block_size_y", [4, 8, 16, 32]),
    Parameter.of("tile_size_x", [1, 2, 4, 8]),
    Parameter.of("tile_size_y", [1, 2, 4, 8]),
    Parameter.of("tile_size_k", [8, 16, 32]),
    Parameter.of("double_buffer", [0, 1]),
]


_SIZES = CONV_SIZES


class Conv2d(Conv2dForm, ConvProblem, Operator):
    summary = "2-D convolution, NCHW or NHWC, stride/padding/dilation; implicit GEMM"
    #: scalar loads only: a config is correct at every shape
    requirements = ()
    admits = (
        *(f"1 <= {d} <= {INT_LIMIT}" for d in _SIZES if d not in ("PH", "PW")),
        f"0 <= PH <= {INT_LIMIT} and 0 <= PW <= {INT_LIMIT}",
        f"H + 2 * PH <= {INT_LIMIT} and W + 2 * PW <= {INT_LIMIT}",
        "P >= 1 and Q >= 1",
        f"N * P * Q <= {INT_LIMIT} and C * R * S <= {INT_LIMIT}",
    )

    def default_config(self, workload: Workload) -> Config:
        self.conv_shape(workload)
        return {
            "block_size_x": 16,
            "block_size_y": 16,
            "tile_size_x": 2,
            "tile_size_y": 2,
            "tile_size_k": 16,
            "double_buffer": 1,
        }

    def geometry(self, workload: Workload) -> Geometry:
        _, nhwc = self.conv_shape(workload)
        pixels = "N * P * Q"
        return simt_geometry(pixels, "K", "1") if nhwc else simt_geometry("K", pixels, "1")

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        _, nhwc = self.conv_shape(workload)
        constants: dict[str, Any] = {**limits.constants(), "b_pad": int(nhwc)}
        return SearchSpace(_PARAMS, SIMT_CONSTRAINTS, constants=constants, name=workload.key)

    def render(self, config: Config, workload: Workload) -> KernelSource:
        _, nhwc = self.conv_shape(workload)
        elem = "float" if workload.dtype == "float32" else "half_t"
        defines = {
            "KERNEL_NAME": f"conv2d_{workload.layout.lower()}_{workload.dtype}",
            "CV_NHWC": int(nhwc),
            "ELEM_T": elem,
            "vector_width": 1,
            "split_k": 1,
            **config,
        }
        body = template("prelude.cuh") + template("conv2d_simt.cuh") + template("gemm_simt.cuh")
        return KernelSource(str(defines["KERNEL_NAME"]), body, defines)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        cs, nhwc = self.conv_shape(workload)
        m, n, k = cs.gemm(nhwc)
        c: dict[str, Any] = dict(config)
        bm, bn = c["block_size_y"] * c["tile_size_y"], c["block_size_x"] * c["tile_size_x"]
        padded = -(-m // bm) * bm * -(-n // bn) * bn
        return {
            **super().derived_features(config, workload),
            "gemm_m": float(m),
            "gemm_n": float(n),
            "gemm_k": float(k),
            "block_tile_m": float(bm),
            "block_tile_n": float(bn),
            "outputs_per_thread": float(c["tile_size_x"] * c["tile_size_y"]),
            "tile_efficiency": m * n / padded,
        }

    def coverage(self, config: Config, workload: Workload) -> np.ndarray:
        """Counts over (output element in layout order, reduction index (c, r, s))."""
        cs, nhwc = self.conv_shape(workload)
        m, n, k = cs.gemm(nhwc)
        gemm = simt_gemm_coverage({**dict(config), "split_k": 1}, m, n, k)
        if nhwc:  # rows are pixels (n, p, q), columns out channels: already y's order
            return gemm.reshape(cs.n * cs.p * cs.q * cs.k, k)
        # rows are out channels, columns pixels: y[n][k][p][q]
        by_pixel = gemm.reshape(cs.k, cs.n, cs.p * cs.q, k).transpose(1, 0, 2, 3)
        return by_pixel.reshape(-1, k)

    def im2col_gemm(self, workload: Workload, args: Arguments) -> np.ndarray:
        """The kernel's implicit GEMM evaluated on the host with the loaders' index arithmetic
        (``conv2d_simt.cuh``), in the output's layout: checks the formulation against
        :meth:`reference` without a GPU."""
        cs, nhwc = self.conv_shape(workload)
        x = np.asarray(args.values[0], dtype=np.float64).ravel()
        w = np.asarray(args.values[1], dtype=np.float64).ravel()
        pix = np.arange(cs.n * cs.p * cs.q)[:, None]
        kk = np.arange(cs.c * cs.r * cs.s)[None, :]
        img, pq = pix // (cs.p * cs.q), pix % (cs.p * cs.q)
        p, q = pq // cs.q, pq % cs.q
        if nhwc:
            r, s, c = kk // (cs.s * cs.c), (kk // cs.c) % cs.s, kk % cs.c
        else:
            c, r, s = kk // (cs.r * cs.s), (kk % (cs.r * cs.s)) // cs.s, kk % cs.s
        h = p * cs.sh - cs.ph + r * cs.dh
        wi = q * cs.sw - cs.pw + s * cs.dw
        inside = (h >= 0) & (h < cs.h) & (wi >= 0) & (wi < cs.w)
        hc, wc = np.clip(h, 0, cs.h - 1), np.clip(wi, 0, cs.w - 1)
        at = (
            ((img * cs.h + hc) * cs.w + wc) * cs.c + c
            if nhwc
            else ((img * cs.c + c) * cs.h + hc) * cs.w + wc
        )
        cols = np.where(inside, x[at], 0.0)  # (pixels, CRS)
        weights = w.reshape(cs.k, -1)  # (K, CRS) in the reduction order of the layout
        out = cols @ weights.T  # (pixels, K)
        if nhwc:
            return out.reshape(cs.n, cs.p, cs.q, cs.k)
        return out.reshape(cs.n, cs.p, cs.q, cs.k).transpose(0, 3, 1, 2)
