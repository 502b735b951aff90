"""``conv2d``: 2-D convolution (cross-correlation, as in deep learning) as an implicit GEMM.

Shape ``NxCxHxWxKxRxS[xSHxSW[xPHxPW[xDHxDW]]]``: batch, input channels, height, width, output
channels, filter height and width, then stride, padding and dilation (height, width), which
default to 1, 0 and 1. Layout ``NCHW`` (weights KCRS) or ``NHWC`` (weights KRSC). Workload
shapes are positive, so the canonical workload keeps N..S, stride and dilation (11 numbers)
in its shape and a non-zero padding in its layout: ``conv2d/8x64x56x56x64x3x3x1x1x1x1/float32/NCHW_pad1x1``. The kernel is the SIMT GEMM core (``cuda/gemm_simt.cuh``) with
loaders that gather the input window on the fly (``cuda/conv2d_simt.cuh``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from search_space.operators.base import (
    Arguments,
    DeviceLimits,
    KernelSource,
    Launch,
    Operator,
    OperatorError,
    parse_shape,
    template,
)
from search_space.operators.matmul import SIMT_CONSTRAINTS, simt_gemm_coverage, simt_launch
from search_space.parameters import Config, Parameter
from search_space.space import SearchSpace
from search_space.workload import Workload

__all__ = ["Conv2d", "ConvShape"]

_PARAMS = [
    Parameter.of("block_size_x", [8, 16, 32]),
    Parameter.of("block_size_y", [4, 8, 16, 32]),
    Parameter.of("tile_size_x", [1, 2, 4, 8]),
    Parameter.of("tile_size_y", [1, 2, 4, 8]),
    Parameter.of("tile_size_k", [8, 16, 32]),
    Parameter.of("double_buffer", [0, 1]),
]


class ConvShape:
    """The 13 numbers of a convolution (N C H W K R S SH SW PH PW DH DW) and its output size."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        (self.n, self.c, self.h, self.w, self.k, self.r, self.s,
         self.sh, self.sw, self.ph, self.pw, self.dh, self.dw) = shape
        self.p = (self.h + 2 * self.ph - self.dh * (self.r - 1) - 1) // self.sh + 1
        self.q = (self.w + 2 * self.pw - self.dw * (self.s - 1) - 1) // self.sw + 1

    def defines(self, nhwc: bool) -> dict[str, int]:
        names = ("N", "C", "H", "W", "K", "R", "S", "SH", "SW", "PH", "PW", "DH", "DW", "P", "Q")
        values = (self.n, self.c, self.h, self.w, self.k, self.r, self.s, self.sh, self.sw,
                  self.ph, self.pw, self.dh, self.dw, self.p, self.q)
        return {**{f"CV_{k}": v for k, v in zip(names, values)}, "CV_NHWC": int(nhwc)}

    def gemm(self, nhwc: bool) -> tuple[int, int, int]:
        """(M, N, K) of the implicit GEMM."""
        pixels, reduce = self.n * self.p * self.q, self.c * self.r * self.s
        return (pixels, self.k, reduce) if nhwc else (self.k, pixels, reduce)


class Conv2d(Operator):
    name = "conv2d"
    layouts = ("NCHW", "NHWC")
    dims = ("N", "C", "H", "W", "K", "R", "S", "SH", "SW", "DH", "DW")
    summary = "2-D convolution, NCHW or NHWC, stride/padding/dilation; implicit GEMM"

    def workload(self, shape: Sequence[int] | str, dtype: str = "float32", layout: str = "") -> Workload:
        """Accepts 7 numbers (N..S), 9 (+ stride), 13 (+ padding, dilation) or the canonical 11
        (N..S, stride, dilation; padding from a layout like ``NCHW_pad1x1``)."""
        dims = parse_shape(shape) if isinstance(shape, str) else tuple(int(d) for d in shape)
        base, _, pad = (layout or "NCHW").partition("_pad")
        ph = pw = 0
        if pad:
            try:
                ph, pw = (int(v) for v in pad.split("x"))
            except ValueError:
                raise OperatorError(f"conv2d: layout {layout!r} is not like NCHW_pad1x1") from None
        if len(dims) == 13:
            if pad:
                raise OperatorError("conv2d: padding given both in the shape and in the layout")
            full = dims
        elif len(dims) == 11:
            full = dims[:9] + (ph, pw) + dims[9:]
        elif len(dims) in (7, 9):
            full = dims + (1, 1)[: 9 - len(dims)] + (ph, pw, 1, 1)
        else:
            raise OperatorError(
                "conv2d: shape is NxCxHxWxKxRxS, optionally followed by stride SHxSW, then padding "
                f"PHxPW and dilation DHxDW; got {len(dims)} numbers"
            )
        full = self.full_shape(full)
        suffix = f"_pad{full[9]}x{full[10]}" if full[9] or full[10] else ""
        wl = super().workload(full[:9] + full[11:], dtype, base)
        return Workload(wl.operator, wl.shape, wl.dtype, base + suffix)

    def full_shape(self, full: tuple[int, ...]) -> tuple[int, ...]:
        """Check the 13 numbers of a convolution."""
        if any(d <= 0 for i, d in enumerate(full) if i not in (9, 10)) or min(full[9:11]) < 0:
            raise OperatorError(f"conv2d: shape {full} has a zero or negative size")
        cs = ConvShape(full)
        if cs.p <= 0 or cs.q <= 0:
            raise OperatorError(f"conv2d: the filter does not fit the padded input (output {cs.p}x{cs.q})")
        return full

    def _shape(self, workload: Workload) -> tuple[ConvShape, bool]:
        self.check(workload)
        base, _, pad = workload.layout.partition("_pad")
        if base not in self.layouts or len(workload.shape) != 11:
            raise OperatorError(f"{workload.key} is not a canonical conv2d workload")
        ph, pw = (int(v) for v in pad.split("x")) if pad else (0, 0)
        s = workload.shape
        return ConvShape(s[:9] + (ph, pw) + s[9:]), base == "NHWC"

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        _, nhwc = self._shape(workload)
        constants: dict[str, Any] = {**limits.constants(), "b_pad": int(nhwc)}
        return SearchSpace(_PARAMS, SIMT_CONSTRAINTS, constants=constants, name=workload.key)

    def render(self, config: Config, workload: Workload) -> KernelSource:
        cs, nhwc = self._shape(workload)
        elem = "float" if workload.dtype == "float32" else "half_t"
        defines = {
            "KERNEL_NAME": f"conv2d_{workload.layout.lower()}_{workload.dtype}",
            **cs.defines(nhwc),
            "ELEM_T": elem,
            "vector_width": 1,
            "split_k": 1,
            **config,
        }
        body = template("prelude.cuh") + template("conv2d_simt.cuh") + template("gemm_simt.cuh")
        return KernelSource(str(defines["KERNEL_NAME"]), body, defines)

    def launch(self, config: Config, workload: Workload) -> Launch:
        cs, nhwc = self._shape(workload)
        m, n, _ = cs.gemm(nhwc)
        return simt_launch(dict(config), m, n)

    def tensor_shapes(self, workload: Workload) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Shapes of x, w and y in the workload's layout."""
        cs, nhwc = self._shape(workload)
        if nhwc:
            return (cs.n, cs.h, cs.w, cs.c), (cs.k, cs.r, cs.s, cs.c), (cs.n, cs.p, cs.q, cs.k)
        return (cs.n, cs.c, cs.h, cs.w), (cs.k, cs.c, cs.r, cs.s), (cs.n, cs.k, cs.p, cs.q)

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        xs, ws, ys = self.tensor_shapes(workload)
        dt = self.np_dtype(workload)
        x = rng.uniform(-1, 1, xs).astype(dt)
        w = rng.uniform(-1, 1, ws).astype(dt)
        return Arguments((x, w, np.zeros(ys, dtype=dt)), outputs=(2,))

    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        cs, nhwc = self._shape(workload)
        x = xp.asarray(args.values[0]).astype(xp.float64)
        w = xp.asarray(args.values[1]).astype(xp.float64)
        if nhwc:  # compute in NCHW / KCRS
            x, w = x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2)
        xpad = xp.pad(x, ((0, 0), (0, 0), (cs.ph, cs.ph), (cs.pw, cs.pw)))
        y = xp.zeros((cs.n, cs.k, cs.p, cs.q), dtype=xp.float64)
        for r in range(cs.r):
            for s in range(cs.s):
                h0, w0 = r * cs.dh, s * cs.dw
                window = xpad[:, :, h0 : h0 + cs.sh * (cs.p - 1) + 1 : cs.sh, w0 : w0 + cs.sw * (cs.q - 1) + 1 : cs.sw]
                y += xp.einsum("ncpq,kc->nkpq", window, w[:, :, r, s])
        return [xp.ascontiguousarray(y.transpose(0, 2, 3, 1)) if nhwc else y]

    def flops(self, workload: Workload) -> float:
        cs, _ = self._shape(workload)
        return 2.0 * cs.n * cs.k * cs.p * cs.q * cs.c * cs.r * cs.s

    def bytes_moved(self, workload: Workload) -> float:
        item = self.item_bytes(workload)
        return float(sum(int(np.prod(s)) for s in self.tensor_shapes(workload)) * item)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        cs, nhwc = self._shape(workload)
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
        cs, nhwc = self._shape(workload)
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
        cs, nhwc = self._shape(workload)
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
        at = ((img * cs.h + hc) * cs.w + wc) * cs.c + c if nhwc else ((img * cs.c + c) * cs.h + hc) * cs.w + wc
        cols = np.where(inside, x[at], 0.0)  # (pixels, CRS)
        weights = w.reshape(cs.k, -1)  # (K, CRS) in the reduction order of the layout
        out = cols @ weights.T  # (pixels, K)
        if nhwc:
            return out.reshape(cs.n, cs.p, cs.q, cs.k)
        return out.reshape(cs.n, cs.p, cs.q, cs.k).transpose(0, 3, 1, 2)
