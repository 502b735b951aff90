"""Every operator template compiles for sm_80 and sm_90 in every config its space allows.

For every operator, dtype and layout, of a realistic shape, and each architecture, the space's
first and last configs (its smallest and largest knob values, where resource limits bite), the
operator's default config and a seeded random sample of others are compiled with NVRTC (the
compiler the GPU backend uses; nvcc when no NVRTC library is installed); each must compile and
be launchable by ptxas' account of its registers and shared memory. The sample holds
``KTUNE_COMPILE_SAMPLE`` configs: 2 in ``make test``, 50 in the full sweep
(``make compile-sweep``). Sizes are kernel arguments; the same configs also compile with the
workload's sizes compiled in (``KT_FIXED_SHAPE``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ktune.search_space.operators import DeviceLimits, get
from ktune.tuner.measure.static import (
    CompilerUnavailable,
    analyze,
    default_compiler,
    launch_problem,
)

#: random configs compiled per case besides the first and the last; 50 in the full sweep
SAMPLE = int(os.environ.get("KTUNE_COMPILE_SAMPLE", "2"))

CASES = [
    ("matmul", "4096x4096x4096", "float32", ""),
    ("matmul", "4096x4096x4096", "float16", ""),
    ("conv2d", "8x64x56x56x128x3x3x1x1x1x1x1x1", "float32", "NCHW"),
    ("conv2d", "8x64x56x56x128x3x3x1x1x1x1x1x1", "float16", "NHWC"),
    ("reduction", "4096x4096", "float32", "sum"),
    ("reduction", "4096x4096", "float16", "max"),
    ("softmax", "4096x1000", "float32", ""),
    ("softmax", "4096x4096", "float16", ""),
    ("transpose", "4096x4096", "float32", ""),
    ("transpose", "4096x2048", "float16", ""),
    ("matmul", "1001x1003x999", "float16", ""),  # odd: synchronous copies (vector_width 1)
]


@pytest.fixture(scope="module")
def compiler():
    try:
        return default_compiler()
    except CompilerUnavailable as exc:
        pytest.skip(f"no CUDA compiler: {exc}")


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    ("name", "shape", "dtype", "layout"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES]
)
def test_sampled_configs_compile_and_fit_the_device(
    compiler, arch: str, name: str, shape: str, dtype: str, layout: str
) -> None:
    op = get(name)
    workload = op.workload(shape, dtype, layout)
    limits = DeviceLimits.for_arch(arch)
    space = op.space(workload, limits)
    drawn = space.sample(SAMPLE, np.random.default_rng(7))
    assert len(space) >= 50 and len(drawn) == SAMPLE
    configs = space.configs([i for i in (0, len(space) - 1) if i not in drawn] + list(drawn))
    configs.append(op.default_config(workload))
    sources = [op.render(c, workload) for c in configs]
    sources += [op.specialised(c, workload) for c in configs]
    infos = analyze(sources, arch, compiler=compiler)
    configs = configs + configs
    failed = [(c, i.error) for c, i in zip(configs, infos) if not i.ok]
    assert not failed, f"{len(failed)} allowed configs do not compile, e.g. {failed[0]}"
    blocked = [
        (c, p)
        for c, i in zip(configs, infos)
        if (p := launch_problem(i, op.launch(c, workload), limits))
    ]
    assert not blocked, f"allowed configs that cannot launch: {blocked[:2]}"
    assert all(i.registers > 0 for i in infos)
