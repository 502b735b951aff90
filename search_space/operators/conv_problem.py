"""The 2-D convolution problem (cross-correlation, as in deep learning) that the GPU and CPU
convolution kernels solve: the shape ``NxCxHxWxKxRxS[xSHxSW[xPHxPW[xDHxDW]]]`` (batch, input
channels, height, width, output channels, filter height and width, then stride, padding and
dilation, which default to 1, 0 and 1), its canonical workload (11 numbers in the shape, a
non-zero padding in the layout: ``conv2d/8x64x56x56x64x3x3x1x1x1x1/float32/NCHW_pad1x1``), the
tensors in each layout (``NCHW`` with weights KCRS, ``NHWC`` with KRSC), inputs, the float64
reference, FLOPs and bytes. Mixed into both operators.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ktune.search_space.operators.base import Arguments, ShapedOperator
from ktune.search_space.operators.forms import CONV_ENTRY, ConvForm, ConvShape
from ktune.search_space.workload import Workload

__all__ = ["CONV_ENTRY", "ConvProblem", "ConvShape"]


class ConvProblem(ConvForm, ShapedOperator):
    """A convolution's workloads (:class:`~ktune.search_space.operators.forms.ConvForm`) and
    data; ``layouts`` says which of NCHW and NHWC the kernel takes."""

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
        return float(
            sum(math.prod(s) for s in self.tensor_shapes(workload)) * item
        )  # no int64 wrap
