"""The 2-D convolution problem (cross-correlation, as in deep learning) that the GPU and CPU
convolution kernels solve: the shape ``NxCxHxWxKxRxS[xSHxSW[xPHxPW[xDHxDW]]]`` (batch, input
channels, height, width, output channels, filter height and width, then stride, padding and
dilation, which default to 1, 0 and 1), its canonical workload (11 numbers in the shape, a
non-zero padding in the layout: ``conv2d/8x64x56x56x64x3x3x1x1x1x1/float32/NCHW_pad1x1``), the
tensors in each layout (``NCHW`` with weights KCRS, ``NHWC`` with KRSC), inputs, the float64
reference, FLOPs and bytes. Mixed into both operators.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ktune.search_space.operators.base import Arguments, OperatorError, ShapedOperator, shape_of
from ktune.search_space.workload import Workload

__all__ = ["ConvProblem", "ConvShape"]


class ConvShape:
    """The 13 numbers of a convolution (N C H W K R S SH SW PH PW DH DW) and its output size."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        (
            self.n,
            self.c,
            self.h,
            self.w,
            self.k,
            self.r,
            self.s,
            self.sh,
            self.sw,
            self.ph,
            self.pw,
            self.dh,
            self.dw,
        ) = shape
        self.p = (self.h + 2 * self.ph - self.dh * (self.r - 1) - 1) // self.sh + 1
        self.q = (self.w + 2 * self.pw - self.dw * (self.s - 1) - 1) // self.sw + 1

    def defines(self, nhwc: bool) -> dict[str, int]:
        names = ("N", "C", "H", "W", "K", "R", "S", "SH", "SW", "PH", "PW", "DH", "DW", "P", "Q")
        values = (
            self.n,
            self.c,
            self.h,
            self.w,
            self.k,
            self.r,
            self.s,
            self.sh,
            self.sw,
            self.ph,
            self.pw,
            self.dh,
            self.dw,
            self.p,
            self.q,
        )
        return {**{f"CV_{k}": v for k, v in zip(names, values)}, "CV_NHWC": int(nhwc)}

    def gemm(self, nhwc: bool) -> tuple[int, int, int]:
        """(M, N, K) of the implicit GEMM."""
        pixels, reduce = self.n * self.p * self.q, self.c * self.r * self.s
        return (pixels, self.k, reduce) if nhwc else (self.k, pixels, reduce)


class ConvProblem(ShapedOperator):
    """A convolution's workloads and data; ``layouts`` says which of NCHW and NHWC the kernel
    takes."""

    layouts: ClassVar[tuple[str, ...]] = ("NCHW", "NHWC")
    dims: ClassVar[tuple[str, ...]] = ("N", "C", "H", "W", "K", "R", "S", "SH", "SW", "DH", "DW")

    @property
    def shape_form(self) -> str:
        return "NxCxHxWxKxRxS[xSHxSW[xPHxPW[xDHxDW]]]"

    def workload(
        self, shape: Sequence[int] | str, dtype: str = "float32", layout: str = ""
    ) -> Workload:
        """Accepts 7 numbers (N..S), 9 (+ stride), 13 (+ padding, dilation) or the canonical 11
        (N..S, stride, dilation; padding from a layout like ``NCHW_pad1x1``)."""
        dims = shape_of(shape)
        base, _, pad = (layout or "NCHW").partition("_pad")
        ph = pw = 0
        if pad:
            try:
                ph, pw = (int(v) for v in pad.split("x"))
            except ValueError:
                raise OperatorError(
                    f"{self.name}: layout {layout!r} is not like NCHW_pad1x1"
                ) from None
        if len(dims) == 13:
            if pad:
                raise OperatorError(
                    f"{self.name}: padding given both in the shape and in the layout"
                )
            full = dims
        elif len(dims) == 11:
            full = dims[:9] + (ph, pw) + dims[9:]
        elif len(dims) in (7, 9):
            full = dims + (1, 1)[: 9 - len(dims)] + (ph, pw, 1, 1)
        else:
            raise OperatorError(
                f"{self.name}: shape is NxCxHxWxKxRxS, "
                "optionally followed by stride SHxSW, then padding "
                f"PHxPW and dilation DHxDW; got {len(dims)} numbers"
            )
        full = self.full_shape(full)
        suffix = f"_pad{full[9]}x{full[10]}" if full[9] or full[10] else ""
        wl = super().workload(full[:9] + full[11:], dtype, base)
        return Workload(wl.operator, wl.shape, wl.dtype, base + suffix)

    def full_shape(self, full: tuple[int, ...]) -> tuple[int, ...]:
        """Check the 13 numbers of a convolution."""
        if any(d <= 0 for i, d in enumerate(full) if i not in (9, 10)) or min(full[9:11]) < 0:
            raise OperatorError(f"{self.name}: shape {full} has a zero or negative size")
        cs = ConvShape(full)
        if cs.p <= 0 or cs.q <= 0:
            raise OperatorError(
                f"{self.name}: the filter does not fit the padded input (output {cs.p}x{cs.q})"
            )
        return full

    def conv_shape(self, workload: Workload) -> tuple[ConvShape, bool]:
        self.check(workload)
        base, _, pad = workload.layout.partition("_pad")
        if base not in self.layouts or len(workload.shape) != 11:
            raise OperatorError(f"{workload.key} is not a canonical {self.name} workload")
        ph, pw = (int(v) for v in pad.split("x")) if pad else (0, 0)
        s = workload.shape
        return ConvShape(s[:9] + (ph, pw) + s[9:]), base == "NHWC"

    def tensor_shapes(
        self, workload: Workload
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Shapes of x, w and y in the workload's layout."""
        cs, nhwc = self.conv_shape(workload)
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
        cs, nhwc = self.conv_shape(workload)
        x = xp.asarray(args.values[0]).astype(xp.float64)
        w = xp.asarray(args.values[1]).astype(xp.float64)
        if nhwc:  # compute in NCHW / KCRS
            x, w = x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2)
        xpad = xp.pad(x, ((0, 0), (0, 0), (cs.ph, cs.ph), (cs.pw, cs.pw)))
        y = xp.zeros((cs.n, cs.k, cs.p, cs.q), dtype=xp.float64)
        for r in range(cs.r):
            for s in range(cs.s):
                h0, w0 = r * cs.dh, s * cs.dw
                window = xpad[
                    :,
                    :,
                    h0 : h0 + cs.sh * (cs.p - 1) + 1 : cs.sh,
                    w0 : w0 + cs.sw * (cs.q - 1) + 1 : cs.sw,
                ]
                y += xp.einsum("ncpq,kc->nkpq", window, w[:, :, r, s])
        return [xp.ascontiguousarray(y.transpose(0, 2, 3, 1)) if nhwc else y]

    def flops(self, workload: Workload) -> float:
        cs, _ = self.conv_shape(workload)
        return 2.0 * cs.n * cs.k * cs.p * cs.q * cs.c * cs.r * cs.s

    def bytes_moved(self, workload: Workload) -> float:
        item = self.item_bytes(workload)
        return float(sum(int(np.prod(s)) for s in self.tensor_shapes(workload)) * item)
