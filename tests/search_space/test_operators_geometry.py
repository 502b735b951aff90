"""Launch geometry covers the problem exactly, emulated on the host for small odd shapes, at
the shape a config was drawn for and at every other shape its requirements hold at (sizes come at
run time); the references agree with straightforward NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ktune.search_space import Config
from ktune.search_space.operators import Arguments, DeviceLimits, Tolerance, get
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
    op.launch = lambda config, workload: Launch((5, 1, 1), (32, 8, 1))  # type: ignore[method-assign]
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


def test_tolerance_checks_in_chunks_as_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large output is compared a chunk at a time (bounded temporaries, on the device when
    the arrays live there): the worst ratio is the whole array's, wherever the error sits."""
    rng = np.random.default_rng(5)
    ref = rng.uniform(-1, 1, (37, 29))
    tol = Tolerance(1e-4, 1e-5)
    out = ref.astype(np.float32)
    out[36, 28] += 0.5  # in the last, short chunk
    whole = tol.check(out, ref)
    monkeypatch.setattr(Tolerance, "chunk", 64)
    assert tol.check(out, ref) == whole and not whole[0]
    assert tol.check(ref.astype(np.float32), ref)[0]
    bad_ref = ref.copy()
    bad_ref[0, 0] = np.nan  # a NaN anywhere fails, never hides as a ratio of NaN
    assert tol.check(ref, bad_ref) == (False, math.inf)
    assert tol.check(out.reshape(-1), ref)[1] == whole[1]  # same items, another shape
    with pytest.raises(ValueError, match="output of 10 items"):
        tol.check(out.reshape(-1)[:10], ref)


# shapes a config drawn at the SMALL shapes is run at: 1, primes, a tile plus one
OTHER_SHAPES: dict[str, list[str]] = {
    "matmul": ["1x1x1", "7x13x5", "33x17x64", "65x3x129", "16x16x16"],
    "conv2d": ["1x1x1x1x1x1x1", "1x2x5x3x3x2x2x1x1x1x1x1x1", "3x1x6x9x2x3x1x1x2x0x0x2x1"],
    "reduction": ["1x1", "5x97", "2x256", "33x1024"],
    "softmax": ["1x1", "3x97", "2x256", "5x1024"],
    "transpose": ["1x1", "3x97", "64x2", "33x65"],
}


@pytest.mark.parametrize(
    ("name", "shape", "dtype", "layout"), SMALL, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in SMALL]
)
def test_configs_cover_every_shape_their_requirements_hold_at(
    name: str, shape: str, dtype: str, layout: str
) -> None:
    op = get(name)
    tuned = op.workload(shape, dtype, layout)
    space = op.space(tuned, LIMITS)
    configs = space.configs(space.sample(8, np.random.default_rng(11)))
    configs.append(op.default_config(tuned))
    ran = 0
    for other in OTHER_SHAPES[name]:
        workload = op.workload(other, dtype, layout)
        for config in configs:
            if not op.requirements_met(config, workload):
                continue
            counts = op.coverage(config, workload)
            assert counts.min() == 1 and counts.max() == 1, (config, other)
            ran += 1
    assert ran >= len(OTHER_SHAPES[name])


def _awkward(op_name: str) -> list[str]:
    """1, primes and a tile plus one in every dimension, for the default configs."""
    if op_name == "matmul":
        return ["1x1x1", "2x3x5", "97x89x83", "65x129x17", "1x4099x1", "4097x1x3"]
    if op_name == "conv2d":
        return ["1x1x1x1x1x1x1", "3x5x7x11x13x3x5x2x3x1x2x2x1", "1x1x17x1x1x1x1"]
    return ["1x1", "97x89", "1x65537", "65537x1", "129x33"]


@pytest.mark.parametrize("name", ["matmul", "conv2d", "reduction", "softmax", "transpose"])
def test_default_configs_hold_at_awkward_shapes_and_fit_the_device(name: str) -> None:
    op = get(name)
    layouts = op.layouts if name != "reduction" else ("sum", "max")
    for dtype in op.dtypes:
        for layout in layouts:
            for shape in _awkward(name):
                workload = op.workload(shape, dtype, layout)
                config = op.default_config(workload)
                assert op.requirements_met(config, workload), (shape, config)
                # a default is a config of the space at a large shape (compiles, launches)
                big = op.workload(_large(name), dtype, layout)
                assert config in op.space(big, LIMITS), (config, big.key)
                if np.prod(workload.shape) < 20000:
                    counts = op.coverage(config, workload)
                    assert counts.min() == 1 and counts.max() == 1, (shape, config)


def _large(name: str) -> str:
    return {
        "matmul": "1024x1024x1024",
        "conv2d": "8x64x28x28x64x3x3",
        "reduction": "1024x4096",
        "softmax": "1024x4096",
        "transpose": "1024x1024",
    }[name]


@pytest.mark.parametrize("name", ["matmul", "conv2d", "reduction", "softmax", "transpose"])
def test_requirements_name_only_knobs_and_sizes_and_the_space_holds_them(name: str) -> None:
    from ktune.search_space.constraints import parse_constraint

    op = get(name)
    for dtype in op.dtypes:
        workload = op.workload(_large(name), dtype, op.layouts[0])
        space = op.space(workload, LIMITS)
        knobs = {p.name for p in space.parameters}
        sizes = set(op.entry.sizes) | {d for d, _ in op.entry.derived}
        expressions = {str(c) for c in space.constraints}
        for requirement in op.requirements:
            used = parse_constraint(requirement, knobs | sizes).names
            assert used <= knobs | sizes and used & knobs, requirement
            assert requirement in expressions, (requirement, "is not in the space")
        for check in op.admits:
            assert parse_constraint(check, sizes).names <= sizes
        assert len(op.entry_sizes(workload)) == len(op.entry.sizes)
        assert op.default_config(workload).keys() == knobs


def test_conv_entry_sizes_take_the_padding_from_the_layout() -> None:
    op = get("conv2d")
    workload = op.workload("2x3x9x11x5x3x3x2x1", "float32", "NHWC_pad1x2")
    assert op.entry_sizes(workload) == (2, 3, 9, 11, 5, 3, 3, 2, 1, 1, 2, 1, 1)
    cs, _ = Conv2d().conv_shape(workload)
    sizes = op.sizes(workload)
    assert (sizes["P"], sizes["Q"]) == (cs.p, cs.q)
    assert tuple(int(v) for v in op.kernel_sizes(workload)) == (
        *op.entry_sizes(workload),
        cs.p,
        cs.q,
    )


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("transpose", "1073741824x1"),
        ("transpose", "1x1073741824"),
        ("reduction", "1073741824x1"),
        ("softmax", "1073741824x1"),
        ("matmul", "1073741824x1x1"),
        ("conv2d", "1024x1x1024x1024x1x1x1"),
    ],
)
def test_grids_fit_the_device_limits_at_huge_shapes(name: str, shape: str) -> None:
    op = get(name)
    workload = op.workload(shape, "float32", op.layouts[0])
    space = op.space(workload, LIMITS)
    configs = [op.default_config(workload), *space.configs(np.arange(min(len(space), 200)))]
    for config in configs:
        grid = op.launch(config, workload).grid
        assert 1 <= grid[0] <= 2**31 - 1 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535


def test_a_specialised_source_compiles_the_sizes_in() -> None:
    op = get("matmul")
    workload = op.workload("37x45x70", "float32")
    config = op.default_config(workload)
    plain, fixed = op.render(config, workload), op.specialised(config, workload)
    assert "KT_M" not in plain.defines and plain.body == fixed.body
    assert fixed.defines["KT_FIXED_SHAPE"] == 1
    assert (fixed.defines["KT_M"], fixed.defines["KT_N"], fixed.defines["KT_K"]) == (37, 45, 70)
    # one source serves every shape: the rendering does not depend on it
    assert op.render(config, op.workload("1x2x3", "float32")).code == plain.code
