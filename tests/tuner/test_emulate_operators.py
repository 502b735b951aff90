"""Every operator's CUDA kernels, run in the CPU emulation, against the NumPy reference.

For each operator, dtype and layout: configs drawn from the space of a large, typical workload
(the default config, the kind a tuned log publishes: widest vectors, largest tiles, deepest
pipeline, and random ones) run at small and awkward shapes (1, primes, just past a tile)
wherever their requirements hold there, as a build's dispatch would serve them. By default a
sample runs (the default and published configs, one random one); ``KTUNE_EMULATE_SWEEP=full``
(``make test-emulate``) runs many random configs on every shape. A planted bug per operator
(an off-by-one, a removed barrier, a swapped fragment index, a missing cp.async wait) must not
pass. With ``-m gpu`` the same configs run on the GPU through CuPy and agree with the emulation.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
import pytest

from ktune.search_space.operators import DeviceLimits, Operator, get
from ktune.search_space.operators.base import KernelSource
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload
from ktune.tuner.measure.emulate import check_config, compile_kernel, prepare_arguments, run

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the emulation needs g++")

LIMITS = DeviceLimits.for_arch("sm_80")
FULL = os.environ.get("KTUNE_EMULATE_SWEEP") == "full"
RANDOM_CONFIGS = 12 if FULL else 1

#: (typical workload whose space the configs come from, awkward shapes they run at)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "matmul-float32": (
        "matmul/512x512x512/float32",
        (
            "matmul/1x1x1/float32",
            "matmul/1x4x4/float32",
            "matmul/33x17x40/float32",
            "matmul/37x68x44/float32",
        ),
    ),
    "matmul-float16": (
        "matmul/512x512x512/float16",
        (
            "matmul/1x1x1/float16",
            "matmul/1x8x8/float16",
            "matmul/33x17x40/float16",
            "matmul/67x136x40/float16",
        ),
    ),
    "conv2d-float32-NCHW": (
        "conv2d/8x64x56x56x64x3x3x1x1x1x1/float32/NCHW_pad1x1",
        (
            "conv2d/1x1x1x1x1x1x1x1x1x1x1/float32/NCHW",
            "conv2d/2x5x9x7x3x3x3x2x2x1x1/float32/NCHW_pad1x1",
        ),
    ),
    "conv2d-float32-NHWC": (
        "conv2d/8x64x56x56x64x3x3x1x1x1x1/float32/NHWC_pad1x1",
        (
            "conv2d/1x1x1x1x1x1x1x1x1x1x1/float32/NHWC",
            "conv2d/2x5x9x7x3x3x3x2x2x1x1/float32/NHWC_pad1x1",
        ),
    ),
    "conv2d-float16-NHWC": (
        "conv2d/8x64x56x56x64x3x3x1x1x1x1/float16/NHWC_pad1x1",
        ("conv2d/1x3x5x7x17x3x3x1x1x2x2/float16/NHWC_pad2x2",),
    ),
    "reduction-float32-sum": (
        "reduction/1024x4096/float32/sum",
        ("reduction/1x1/float32/sum", "reduction/7x33/float32/sum", "reduction/3x264/float32/sum"),
    ),
    "reduction-float16-max": (
        "reduction/1024x4096/float16/max",
        ("reduction/1x1/float16/max", "reduction/7x40/float16/max", "reduction/3x520/float16/max"),
    ),
    "softmax-float32": (
        "softmax/1024x1024/float32",
        ("softmax/1x1/float32", "softmax/5x33/float32", "softmax/3x264/float32"),
    ),
    "softmax-float16": (
        "softmax/1024x1024/float16",
        ("softmax/1x1/float16", "softmax/5x40/float16", "softmax/3x520/float16"),
    ),
    "transpose-float32": (
        "transpose/1024x1024/float32",
        ("transpose/1x1/float32", "transpose/13x7/float32", "transpose/40x72/float32"),
    ),
    "transpose-float16": (
        "transpose/1024x1024/float16",
        ("transpose/1x1/float16", "transpose/8x40/float16", "transpose/72x24/float16"),
    ),
}

_PIPELINE = ("stages", "double_buffer", "split_k", "items_per_thread", "blocks_per_row")


def published(op: Operator, workload: Workload) -> Config:
    """A config of the kind tuned logs publish: the widest vectors, then the most work per
    block, then the deepest pipeline (among a seeded sample of the space)."""
    space = op.space(workload, LIMITS)
    sample = space.configs(space.sample(min(len(space), 400), np.random.default_rng(0)))

    def score(c: Config) -> tuple[int, int, int]:
        ints = {k: int(v) for k, v in c.items() if isinstance(v, (int, bool))}
        tiles = int(np.prod([v for k, v in ints.items() if k.startswith(("tile", "block"))]))
        depth = int(np.prod([ints[k] for k in _PIPELINE if k in ints]))
        return ints.get("vector_width", 1), tiles, depth

    return max(sample, key=score)


def configs_of(case: str) -> list[tuple[str, Config]]:
    typical, _ = CASES[case]
    workload = Workload.from_key(typical)
    op = get(workload.operator)
    space = op.space(workload, LIMITS)
    drawn = space.configs(space.sample(RANDOM_CONFIGS, np.random.default_rng(sum(map(ord, case)))))
    return [
        ("default", op.default_config(workload)),
        ("published", published(op, workload)),
        *((f"random{i}", c) for i, c in enumerate(drawn)),
    ]


def _params() -> list[Any]:
    out = []
    for case in CASES:
        for label, config in configs_of(case):
            out.append(pytest.param(case, config, id=f"{case}-{label}"))
    return out


@pytest.mark.parametrize(("case", "config"), _params())
def test_kernels_give_the_reference_answer(case: str, config: Config) -> None:
    """Each shape where the config's requirements hold; at least one shape per config runs."""
    _, shapes = CASES[case]
    ran = 0
    for key in shapes:
        workload = Workload.from_key(key)
        op = get(workload.operator)
        result = check_config(op, config, workload, limits=LIMITS)
        if result.status == "invalid":
            continue
        assert result.ok, result.error
        ran += 1
    assert ran, f"no shape of {case} admits {config}"


def test_a_published_config_runs_where_a_tuned_shape_is_not() -> None:
    """fp16 matmul with 8-wide cp.async (as tuned at 4096^3) at a shape past its tiles."""
    workload = Workload.from_key("matmul/72x136x40/float16")
    op = get("matmul")
    config = {**published(op, Workload.from_key("matmul/512x512x512/float16")), "vector_width": 8}
    assert op.requirements_met(config, workload)
    result = check_config(op, config, workload, limits=LIMITS)
    assert result.ok, result.error


class _Mutant(Operator):
    """An operator whose kernel source has one planted change."""


def mutant(op: Operator, old: str, new: str) -> Operator:
    base = type(op)

    def render(self: Operator, config: Config, workload: Workload) -> KernelSource:
        source = base.render(self, config, workload)
        assert old in source.body, f"the planted bug's anchor {old!r} is not in the kernel"
        return KernelSource(source.name, source.body.replace(old, new, 1), source.defines)

    return type(f"Mutant{base.__name__}", (base,), {"render": render})()  # type: ignore[no-any-return]


#: (workload, config overrides, anchor, replacement, what the emulation must say)
MUTATIONS = {
    "matmul-f32-off-by-one-store": (
        "matmul/33x17x40/float32",
        {},
        "if (m < p.gm && n < p.gn) store_c",
        "if (m <= p.gm && n < p.gn) store_c",
        "out of bounds",
    ),
    "matmul-f32-removed-barrier": (
        "matmul/33x17x40/float32",
        {"double_buffer": 0},
        "if (STAGES == 1) {\n            __syncthreads();",
        "if (STAGES == 1) {\n",
        "race",
    ),
    "matmul-f32-double-buffer-removed-barrier": (
        "matmul/33x17x40/float32",
        {"double_buffer": 1},
        "if (more) stash(s ^ 1);\n            __syncthreads();",
        "if (more) stash(s ^ 1);\n",
        "",
    ),
    "matmul-f16-swapped-fragment": (
        "matmul/33x17x40/float16",
        {},
        "bf[j + 1][0] = r[2];",
        "bf[j + 1][0] = r[3];",
        "differs from the reference",
    ),
    "matmul-f16-a-fragment-rows": (
        "matmul/33x17x40/float16",
        {},
        "(wm0 + i * 16 + lane % 16) * AS",
        "(wm0 + i * 16 + lane / 2) * AS",
        "differs from the reference",
    ),
    "matmul-f16-missing-cp-async-wait": (
        "matmul/32x24x40/float16",
        {"vector_width": 8},
        "wait_copies<stages - 2>();",
        "wait_copies<stages - 1>();",
        "",
    ),
    "conv2d-nchw-off-by-one-padding": (
        "conv2d/2x5x9x7x3x3x3x2x2x1x1/float32/NCHW_pad1x1",
        {},
        "if (h < 0 || h >= g.h ||",
        "if (h < 0 || h > g.h ||",
        "",
    ),
    "conv2d-nhwc-swapped-index": (
        "conv2d/2x5x9x7x3x3x2x2x2x1x1/float32/NHWC_pad1x1",
        {},
        "s = (kk / g.c) % g.s;",
        "s = (kk / g.c) % g.r;",
        "",
    ),
    "reduction-removed-barrier": (
        "reduction/7x33/float32/sum",
        {"reduce_method": "smem"},
        "tree[ty][tx + s]);\n            __syncthreads();",
        "tree[ty][tx + s]);\n",
        "race",
    ),
    "reduction-off-by-one-column": (
        "reduction/7x33/float32/sum",
        {},
        "const elem_t* p = x + (size_t)row * cols;",
        "const elem_t* p = x + (size_t)row * cols + 1;",
        "out of bounds",
    ),
    "softmax-removed-barrier": (
        "softmax/5x40/float32",
        {"block_size_x": 64},
        "        __syncthreads();\n        m = part[ty][0][0];",
        "        m = part[ty][0][0];",
        "",
    ),
    "transpose-removed-barrier": (
        "transpose/13x7/float32",
        {},
        "    __syncthreads();\n",
        "\n",
        "",
    ),
    "transpose-off-by-one-edge": (
        "transpose/40x72/float32",
        {},
        "if (oc < cols && orow < rows)",
        "if (oc < cols && orow <= rows)",
        "",
    ),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_planted_bugs_are_caught(name: str) -> None:
    key, overrides, old, new, says = MUTATIONS[name]
    workload = Workload.from_key(key)
    op = get(workload.operator)
    config = {**op.default_config(workload), **overrides}
    assert check_config(op, config, workload, limits=LIMITS).ok  # the kernel itself is right
    result = check_config(mutant(op, old, new), config, workload, limits=LIMITS)
    assert result.status in ("wrong_result", "runtime_error"), result
    assert says in result.error
    assert f"{op.name} {workload.key} config {{" in result.error  # names kernel and config


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(CASES))
def test_the_gpu_agrees_with_the_emulation(case: str) -> None:
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver or no device
        pytest.skip("no CUDA device")
    for _, config in configs_of(case):
        for key in CASES[case][1]:
            workload = Workload.from_key(key)
            op = get(workload.operator)
            if not op.requirements_met(config, workload):
                continue
            source, launch = op.render(config, workload), op.launch(config, workload)
            values, outputs, names = prepare_arguments(op, config, workload)
            emulated = run(compile_kernel(source), launch, values, outputs, names)
            device = [cp.asarray(v) if isinstance(v, np.ndarray) else v for v in values]
            module = cp.RawModule(code=source.code, options=source.options, backend="nvrtc")
            kernel = module.get_function(source.name)
            if launch.shared_mem > 48 * 1024:
                kernel.max_dynamic_shared_size_bytes = launch.shared_mem
            kernel(launch.grid, launch.block, tuple(device), shared_mem=launch.shared_mem)
            for i, mine in zip(outputs, emulated):
                theirs = cp.asnumpy(device[i])
                tol = op.tolerance(workload)
                ok, worst = tol.check(theirs, mine.astype(np.float64))
                assert ok, f"{key} {config}: GPU and emulation differ ({worst:.3g} x tolerance)"


def test_a_split_max_of_negative_zeros_is_negative_zero() -> None:
    """Rows split over blocks combine their maxima with integer atomics on the float bits: a
    partial maximum of -0.0 must take the path of the negative floats (it once took that of the
    non-negative ones, where -0.0's bits are the smallest int, and the row stayed -inf)."""
    workload = Workload.from_key("reduction/4x64/float32/max")
    op = get("reduction")
    config = {**op.default_config(workload), "block_size_x": 32, "blocks_per_row": 2}
    config["items_per_thread"] = 1
    values, outputs, names = prepare_arguments(op, config, workload)
    x = np.full((4, 64), -0.0, dtype=np.float32)
    x[1] = -1.0
    x[1, 40] = -0.0  # the row's maximum is in the second split only
    x[2, 3] = 0.5
    values[0] = x
    kernel = compile_kernel(op.render(config, workload))
    (out,) = run(kernel, op.launch(config, workload), values, outputs, names)
    assert list(out) == [0.0, 0.0, 0.5, 0.0]
    assert list(np.signbit(out)) == [True, True, False, True]
