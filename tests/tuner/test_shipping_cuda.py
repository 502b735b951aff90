"""GPU variants of a build: every operator, dtype and layout compiles for sm_80 and sm_90 with
nvcc into objects that export their launchers and link together into one library; the
launchers refuse sizes a config cannot serve, and (``-m gpu``) compute what the reference does
at awkward shapes, through ctypes, on a CUDA stream."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ktune.search_space import Config
from ktune.search_space.operators import DeviceLimits, Operator, get
from ktune.search_space.workload import Workload
from ktune.tuner.measure.static import find_nvcc
from ktune.tuner.shipping.cuda import (
    CudaBuildError,
    compile_objects,
    normalise_arch,
    variant_source,
)

NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
LIMITS = DeviceLimits.for_arch("sm_80")

# (operator, dtype, layout, the shape configs are drawn at)
CASES = [
    ("matmul", "float32", "", "1024x1024x1024"),
    ("matmul", "float16", "", "1024x1024x1024"),
    *(
        ("conv2d", dtype, layout, "8x64x28x28x64x3x3x1x1x1x1x1x1")
        for dtype in ("float32", "float16")
        for layout in ("NCHW", "NHWC")
    ),
    *(
        ("reduction", dtype, layout, "1024x4096")
        for dtype in ("float32", "float16")
        for layout in ("sum", "max")
    ),
    ("softmax", "float32", "", "1024x1000"),
    ("softmax", "float16", "", "1024x4096"),
    ("transpose", "float32", "", "1024x1024"),
    ("transpose", "float16", "", "1024x2048"),
]


def _label(case: tuple[str, str, str, str]) -> str:
    return "_".join(p for p in case[:3] if p)


def _configs(op: Operator, workload: Workload, seed: int = 5) -> list[Config]:
    """The default config and two sampled from the space at ``workload``."""
    space = op.space(workload, LIMITS)
    drawn = space.configs(space.sample(2, np.random.default_rng(seed)))
    return [op.default_config(workload), *drawn]


@cache
def _variants() -> dict[str, tuple[Operator, Workload, list[tuple[str, Config]]]]:
    out = {}
    for case in CASES:
        name, dtype, layout, shape = case
        op = get(name)
        workload = op.workload(shape, dtype, layout)
        label = _label(case)
        out[label] = (
            op,
            workload,
            [(f"kt_{label}_{i}", c) for i, c in enumerate(_configs(op, workload))],
        )
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """One unit per case holding its three variants (namespaced: no clashes), compiled for
    sm_80 and sm_90, and a shared library linked from all of them."""
    if NVCC is None:
        pytest.skip("nvcc not installed")
    work = tmp_path_factory.mktemp("cuda-variants")
    units = {
        label: "\n".join(variant_source(op, wl, c, sym) for sym, c in variants)
        for label, (op, wl, variants) in _variants().items()
    }
    objects = compile_objects(units, ["sm_80", "90"], work)
    library = work / "libvariants.so"
    subprocess.run(
        [NVCC, "-shared", "-cudart", "shared", "-o", str(library), *map(str, objects)],
        check=True,
        capture_output=True,
    )
    return objects, library


@needs_nvcc
@pytest.mark.slow
def test_every_case_compiles_and_exports_its_launchers(built: tuple[list[Path], Path]) -> None:
    objects, library = built
    assert len(objects) == len(CASES)
    for obj, (_label_, (_, _, variants)) in zip(objects, _variants().items()):
        table = subprocess.run(["nm", "-g", str(obj)], capture_output=True, text=True).stdout
        defined = {line.split()[-1] for line in table.splitlines() if " T " in line}
        for symbol, _ in variants:
            assert symbol in defined, (obj.name, symbol)
    lib_table = subprocess.run(["nm", "-D", str(library)], capture_output=True, text=True).stdout
    assert "kt_matmul_float16_0" in lib_table


def _launcher(library: ctypes.CDLL, op: Operator, symbol: str) -> Any:
    fn = getattr(library, symbol)
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.c_void_p,
        *(ctypes.c_int64 for _ in op.entry.sizes),
        *(ctypes.c_void_p for _ in op.entry.pointers),
    ]
    return fn


def _cuda_usable() -> bool:
    return shutil.which("nvidia-smi") is not None and os.path.exists("/dev/nvidiactl")


@needs_nvcc
@pytest.mark.slow
def test_launchers_refuse_sizes_their_config_cannot_serve(built: tuple[list[Path], Path]) -> None:
    """Checked before any CUDA call, so this runs without a GPU: 1 is cudaErrorInvalidValue."""
    lib = ctypes.CDLL(str(built[1]))
    fake = [ctypes.c_void_p(256)] * 3
    op, _, variants = _variants()["matmul_float32"]
    symbol, config = variants[0]
    run = _launcher(lib, op, symbol)
    assert run(None, 0, 8, 8, *fake) == 1  # a zero size
    assert run(None, 8, 8, 2**31, *fake) == 1  # beyond 32-bit indices
    assert run(None, 8, 8, 8, None, fake[1], fake[2]) == 1  # a null pointer
    wide = [(s, c) for s, c in variants if int(c["vector_width"]) > 1]
    if wide:  # a vectorised variant at an N it cannot load in vectors
        assert _launcher(lib, op, wide[0][0])(None, 8, 7, 8, *fake) == 1
    conv, _, conv_variants = _variants()["conv2d_float32_NCHW"]
    run_conv = _launcher(lib, conv, conv_variants[0][0])
    # filter 5x5 on a 3x3 image without padding: no output (P <= 0)
    assert run_conv(None, 1, 1, 3, 3, 1, 5, 5, 1, 1, 0, 0, 1, 1, *fake) == 1
    if not _cuda_usable():
        # valid sizes reach CUDA, which answers without a device; never "invalid value" (1)
        # nor "invalid configuration" (9): a 2**30 x 1 transpose fits the grid
        tr, _, tr_variants = _variants()["transpose_float32"]
        code = _launcher(lib, tr, tr_variants[0][0])(None, 2**30, 1, *fake[:2])
        assert code not in (0, 1, 9)


def test_bad_architectures_and_missing_nvcc_are_one_line_errors(tmp_path: Path) -> None:
    assert normalise_arch("sm_90") == normalise_arch("90") == "90"
    with pytest.raises(CudaBuildError, match="not like sm_80"):
        normalise_arch("ampere")
    with pytest.raises(CudaBuildError, match="nvcc not found"):
        compile_objects({"u": ""}, ["sm_80"], tmp_path, nvcc=str(tmp_path / "no-nvcc"))
    if NVCC is None:
        return
    for arch in ("sm_12", "sm_999"):
        with pytest.raises(CudaBuildError, match=f"cannot target {arch}") as info:
            compile_objects({"u": ""}, [arch], tmp_path)
        assert "\n" not in str(info.value)
    with pytest.raises(CudaBuildError, match="nvcc failed on broken") as info:
        compile_objects({"broken": "this is not C++;"}, ["sm_80"], tmp_path)
    assert "\n" not in str(info.value)


def test_launcher_names_are_checked() -> None:
    op = get("matmul")
    wl = op.workload("64x64x64", "float32")
    with pytest.raises(ValueError, match="not a C identifier"):
        variant_source(op, wl, op.default_config(wl), "bad-name")


# ---------------------------------------------------------------- on a GPU


def _device_ok() -> bool:
    try:
        import cupy as cp

        return bool(cp.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # noqa: BLE001 - no CuPy, driver or device
        return False


# awkward shapes per operator: 1, primes, a tile plus one
AWKWARD: dict[str, list[str]] = {
    "matmul": ["1x1x1", "17x31x7", "129x65x33", "1x1000x1", "128x128x129"],
    "conv2d": ["1x1x1x1x1x1x1", "2x3x7x5x4x3x3x2x1x1x0x1x2", "1x5x13x17x7x3x2x1x2x2x1x1x1"],
    "reduction": ["1x1", "3x1021", "257x64"],
    "softmax": ["1x1", "3x1021", "17x4096"],
    "transpose": ["1x1", "31x17", "1025x33"],
}


@pytest.mark.gpu
@pytest.mark.skipif(not _device_ok(), reason="needs an NVIDIA GPU with CuPy")
@pytest.mark.parametrize("label", list(_variants()))
def test_shipped_variants_compute_the_reference_at_awkward_shapes(
    label: str, built: tuple[list[Path], Path]
) -> None:
    import cupy as cp

    lib = ctypes.CDLL(str(built[1]))
    op, tuned, variants = _variants()[label]
    stream = cp.cuda.Stream(non_blocking=True)
    checked = 0
    for shape in AWKWARD[op.name]:
        workload = op.workload(shape, tuned.dtype, tuned.layout.split("_pad")[0])
        host = op.arguments(workload, np.random.default_rng(3))
        (ref,) = op.reference(workload, host)
        for symbol, config in variants:
            run = _launcher(lib, op, symbol)
            dev = [cp.asarray(v) for v in host.values]
            code = run(stream.ptr, *op.entry_sizes(workload), *(int(a.data.ptr) for a in dev))
            if not op.requirements_met(config, workload):
                assert code == 1, (symbol, shape)
                continue
            assert code == 0, (symbol, shape, code)
            stream.synchronize()
            ok, worst = op.tolerance(workload).check(cp.asnumpy(dev[host.outputs[0]]), ref)
            assert ok, (symbol, config, shape, worst)
            checked += 1
    assert checked >= len(AWKWARD[op.name])  # the default config at least, at every shape
