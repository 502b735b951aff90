"""Launch geometry covers the problem exactly, emulated on the host for small odd shapes, and
the references agree with straightforward NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from ktune.search_space import Config
from ktune.search_space.operators import Arguments, DeviceLimits, get
from ktune.search_space.operators.conv2d import Conv2d, ConvShape

LIMITS = DeviceLimits.for_arch("sm_80")

SMALL = [
    ("matmul", "37x45x70", "float32", ""),
    ("matmul", "37x45x72", "float16", ""),
    ("conv2d", "2x3x9x11x5x3x3x2x1x1x0x1x2", "float32", "NCHW"),
    ("conv2d", "2x3x9x11x5x3x3x1x2x2x1x2x1", "float16", "NHWC"),
    ("reduction", "37x301", "float32", "sum"),
    ("reduction", "37x300", "float16", "max"),
    ("softmax", "13x301", "float32", ""),
    ("softmax", "13x300", "float16", ""),
    ("transpose", "37x45", "float32", ""),
    ("transpose", "36x44", "float16", ""),
]


@pytest.mark.parametrize(
    ("name", "shape", "dtype", "layout"), SMALL, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in SMALL]
)
def test_every_output_is_written_exactly_once(
    name: str, shape: str, dtype: str, layout: str
) -> None:
    op = get(name)
    workload = op.workload(shape, dtype, layout)
    space = op.space(workload, LIMITS)
    for config in space.configs(space.sample(25, np.random.default_rng(3))):
        counts = op.coverage(config, workload)
        assert counts.min() == 1 and counts.max() == 1, (
            config,
            int(counts.min()),
            int(counts.max()),
        )


def test_split_k_partitions_the_reduction() -> None:
    op = get("matmul")
    workload = op.workload("19x23x200", "float32")
    space = op.space(workload, LIMITS)
    splits = [c for c in space.configs(np.arange(len(space))) if c["split_k"] == 8][:10]
    assert splits
    for config in splits:
        assert (op.coverage(config, workload) == 1).all()


def test_coverage_detects_a_wrong_geometry() -> None:
    """The emulation is not vacuous: a grid one block short leaves outputs unwritten."""
    op = get("transpose")
    workload = op.workload("64x64", "float32")
    config: Config = {
        "tile_size_x": 32,
        "block_size_x": 32,
        "block_size_y": 8,
        "padding": 1,
        "vector_width": 1,
    }
    assert (op.coverage(config, workload) == 1).all()
    short = op.workload("64x65", "float32")  # same config on a wider matrix: one more tile column
    counts = op.coverage(config, short)
    assert counts.shape == (65, 64) and (counts == 1).all()
    from ktune.search_space.operators.base import Launch

    real = op.launch
    op.launch = lambda config, workload: Launch((1, 2, 1), (32, 8, 1))  # type: ignore[method-assign]
    try:
        assert (op.coverage(config, short) == 0).any()
    finally:
        op.launch = real  # type: ignore[method-assign]


def test_references_agree_with_numpy() -> None:
    rng = np.random.default_rng(0)
    mm = get("matmul")
    w = mm.workload("7x9x11", "float16")
    args = mm.arguments(w, rng)
    (ref,) = mm.reference(w, args)
    a, b = (np.asarray(v, dtype=np.float64) for v in args.values[:2])
    np.testing.assert_allclose(ref, a @ b, rtol=1e-12)
    assert args.values[0].dtype == np.float16 and args.outputs == (2,)

    red = get("reduction")
    for layout, fn in (("sum", np.sum), ("max", np.max)):
        w = red.workload("5x33", "float32", layout)
        args = red.arguments(w, rng)
        np.testing.assert_allclose(
            red.reference(w, args)[0], fn(args.values[0].astype(np.float64), axis=1)
        )
        assert args.values[1][0] == (-np.inf if layout == "max" else 0.0)

    sm = get("softmax")
    w = sm.workload("4x17", "float32")
    args = sm.arguments(w, rng)
    (ref,) = sm.reference(w, args)
    x = args.values[0].astype(np.float64)
    np.testing.assert_allclose(ref, np.exp(x) / np.exp(x).sum(axis=1, keepdims=True), rtol=1e-12)

    tr = get("transpose")
    w = tr.workload("3x5", "float16")
    args = tr.arguments(w, rng)
    np.testing.assert_array_equal(tr.reference(w, args)[0], args.values[0].T.astype(np.float64))


def _direct_conv(x: np.ndarray, w: np.ndarray, cs: ConvShape) -> np.ndarray:
    """The textbook seven-loop convolution (NCHW, KCRS), for tiny shapes."""
    y = np.zeros((cs.n, cs.k, cs.p, cs.q))
    for n in range(cs.n):
        for k in range(cs.k):
            for p in range(cs.p):
                for q in range(cs.q):
                    for c in range(cs.c):
                        for r in range(cs.r):
                            for s in range(cs.s):
                                h, wi = p * cs.sh - cs.ph + r * cs.dh, q * cs.sw - cs.pw + s * cs.dw
                                if 0 <= h < cs.h and 0 <= wi < cs.w:
                                    y[n, k, p, q] += x[n, c, h, wi] * w[k, c, r, s]
    return y


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv_reference_and_implicit_gemm_match_the_direct_convolution(layout: str) -> None:
    op = get("conv2d")
    assert isinstance(op, Conv2d)
    workload = op.workload("2x3x7x8x4x3x2x2x1x1x2x1x2", "float32", layout)
    cs, _ = op.conv_shape(workload)
    args = op.arguments(workload, np.random.default_rng(1))
    x, wt = (np.asarray(v, dtype=np.float64) for v in args.values[:2])
    if layout == "NHWC":
        x, wt = x.transpose(0, 3, 1, 2), wt.transpose(0, 3, 1, 2)
    direct = _direct_conv(x, wt, cs)
    if layout == "NHWC":
        direct = direct.transpose(0, 2, 3, 1)
    (ref,) = op.reference(workload, args)
    np.testing.assert_allclose(ref, direct, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.im2col_gemm(workload, args), direct, rtol=1e-12, atol=1e-12)


def test_tolerance_flags_wrong_outputs() -> None:
    op = get("matmul")
    w = op.workload("16x16x64", "float32")
    args = op.arguments(w, np.random.default_rng(2))
    (ref,) = op.reference(w, args)
    tol = op.tolerance(w)
    assert tol.check(ref.astype(np.float32), ref)[0]
    wrong = ref.astype(np.float32).copy()
    wrong[3, 4] += 0.01 * np.abs(ref).max()
    assert not tol.check(wrong, ref)[0]
    nan = ref.astype(np.float32).copy()
    nan[0, 0] = np.nan
    assert not tol.check(nan, ref)[0]
    assert isinstance(args, Arguments)
