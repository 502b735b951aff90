"""``ktune build`` for a GPU from a log with planted trials: nvcc builds every variant for
sm_80 and sm_90, a C program links the library, and the dispatch never serves a config that
is invalid at the called shape (fp16 matmul, vector_width 8 tuned at 4096^3, called at
4096x4100x4100). With ``-m gpu`` the library's results are checked against CuPy."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ktune.cli.app import main
from ktune.db import TrialIn, TuningLog
from ktune.kernels import load
from ktune.search_space import Config
from ktune.search_space.operators import DeviceLimits, get
from ktune.tuner.measure.static import find_nvcc

pytestmark = [
    pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed"),
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
]
GPU = "NVIDIA H100 80GB HBM3"
LIMITS = DeviceLimits.for_arch("sm_90")


def _config(shape: str, dtype: str, layout: str, name: str, **knobs: int) -> Config:
    """A config of ``name``'s space at ``shape`` with the given knob values."""
    op = get(name)
    space = op.space(op.workload(shape, dtype, layout), LIMITS)
    for config in space.configs(space.sample(min(len(space), 4000), np.random.default_rng(0))):
        if all(config[k] == v for k, v in knobs.items()):
            return config
    raise AssertionError(f"no {name} config with {knobs} at {shape}")


def _plant(url: str, toolchain: dict[str, str] | None = None) -> dict[str, Config]:
    """Best trials of fp16 matmul at 4096^3 (vector_width 8) and 1000^3 (vector_width 4),
    and of an NHWC convolution, as imports on an H100."""
    planted = {
        "matmul/4096x4096x4096/float16": _config(
            "4096x4096x4096", "float16", "", "matmul", vector_width=8
        ),
        "matmul/1000x1000x1000/float16": _config(
            "1000x1000x1000", "float16", "", "matmul", vector_width=4
        ),
        "conv2d/8x64x28x28x64x3x3x1x1x1x1/float32/NHWC_pad1x1": _config(
            "8x64x28x28x64x3x3x1x1x1x1x1x1", "float32", "NHWC", "conv2d"
        ),
    }
    with TuningLog.open(url) as tlog:
        device = tlog.get_or_create_device(
            GPU, "NVIDIA", "Hopper", {"name": GPU, "compute_capability": "9.0"}
        )
        for key, config in planted.items():
            operator, shape, dtype, *layout = key.split("/")
            workload = tlog.get_or_create_workload(
                key,
                operator,
                [int(v) for v in shape.split("x")],
                dtype,
                layout[0] if layout else "",
            )
            row = TrialIn(
                config=config,
                config_key=json.dumps(config, sort_keys=True),
                status="ok",
                time_ms=1.0,
                times_ms=(1.0,),
                strategy="import",
                toolchain=toolchain or {},
            )
            tlog.add_trials(None, workload.id, device.id, "cupy", [row])
    return planted


@pytest.fixture(scope="module")
def gpu_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Config], str]:
    root = tmp_path_factory.mktemp("gpu-ship")
    url = f"sqlite:///{root / 'log.db'}"
    planted = _plant(url)
    out = root / "kernels"
    code = main(
        ["build", "--op", "matmul,conv2d", "--arch", "sm_80,sm_90", "--out", str(out), "--db", url]
    )
    assert code == 0
    return out, planted, url


def test_every_variant_is_compiled_for_each_architecture(
    gpu_build: tuple[Path, dict[str, Config], str],
) -> None:
    out, _, _ = gpu_build
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["toolchain"]["architectures"] == ["sm_80", "sm_90"]
    assert {e["name"] for e in manifest["entries"]} == {
        "ktune_matmul_float16",
        "ktune_conv2d_nhwc_float32",
    }
    header = (out / "include" / "ktune_kernels.h").read_text()
    assert (
        "int ktune_matmul_float16(cudaStream_t stream, int64_t M, int64_t N, int64_t K, "
        "const void *A, const void *B, void *C);" in header
    )
    cuobjdump = shutil.which("cuobjdump") or str(Path(find_nvcc() or "").parent / "cuobjdump")
    if Path(cuobjdump).exists():
        listed = subprocess.run(
            [cuobjdump, "--list-elf", str(out / "lib" / "libktune_kernels.so")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "sm_80" in listed and "sm_90" in listed


_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "ktune_kernels.h"
int main(int argc, char **argv) {
    for (int i = 1; i + 2 < argc; i += 3) {
        int64_t s[3] = {atoll(argv[i]), atoll(argv[i + 1]), atoll(argv[i + 2])};
        printf("%d\n", ktune_matmul_float16_variant(s));
    }
    /* a null pointer is refused before anything reaches the GPU */
    printf("%d\n", ktune_matmul_float16(0, 64, 64, 64, NULL, NULL, NULL));
    return 0;
}
"""


def test_a_c_program_links_and_the_dispatch_never_picks_an_invalid_config(
    gpu_build: tuple[Path, dict[str, Config], str], tmp_path: Path
) -> None:
    out, planted, _ = gpu_build
    (tmp_path / "prog.c").write_text(_PROGRAM)
    exe = tmp_path / "prog"
    subprocess.run(
        ["cc", str(tmp_path / "prog.c"), f"-I{out / 'include'}", f"-L{out / 'lib'}",
         "-lktune_kernels", f"-Wl,-rpath,{out / 'lib'}", "-o", str(exe)],
        check=True,
    )  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    entry = next(e for e in manifest["entries"] if e["name"] == "ktune_matmul_float16")
    width = [v["config"]["vector_width"] for v in entry["variants"]]
    shapes = [
        (4096, 4096, 4096),
        (4096, 4100, 4100),
        (4096, 4096, 4098),
        (1000, 1000, 1001),
        (1000, 1000, 1000),
    ]
    done = subprocess.run(
        [str(exe), *(str(v) for s in shapes for v in s)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    picks = [int(v) for v in done.stdout.split()]
    chosen = [width[p] for p in picks[: len(shapes)]]
    assert chosen[0] == 8 and chosen[4] == 4
    for (m, n, k), w in zip(shapes, chosen):
        assert k % w == 0 and n % w == 0, (m, n, k, w)
    assert picks[-1] == -1  # KTUNE_INVALID_ARGUMENT
    assert planted  # the planted winners are what the manifest serves
    served = {s["workload"] for v in entry["variants"] for s in v["serves"]}
    assert served == {k for k in planted if k.startswith("matmul/")}


def test_a_bad_architecture_is_one_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], gpu_build: tuple[Path, dict[str, Config], str]
) -> None:
    out, _, url = gpu_build
    before = (out / "manifest.json").read_bytes()
    code = main(["build", "--op", "matmul", "--arch", "sm_1", "--out", str(out), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and "sm_1" in err and err.count("\n") == 1, err
    assert (out / "manifest.json").read_bytes() == before


def test_stale_winners_ship_only_when_allowed_and_say_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _plant(url, toolchain={"kernel": "a template ktune no longer has"})
    out = tmp_path / "kernels"
    args = ["build", "--op", "matmul", "--arch", "sm_90", "--out", str(out), "--db", url]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "stale" in err and "--allow-stale" in err and not out.exists()
    assert main([*args, "--allow-stale"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    served = [s for v in manifest["entries"][0]["variants"] for s in v["serves"]]
    assert served and all("kernel template" in s["stale"] for s in served)


@pytest.mark.gpu
def test_the_library_computes_what_cupy_does(
    gpu_build: tuple[Path, dict[str, Config], str],
) -> None:
    cp = pytest.importorskip("cupy")
    kernels = load(gpu_build[0])
    matmul = kernels.matmul_float16
    stream = cp.cuda.Stream(non_blocking=True)
    for m, n, k in [(4096, 4100, 4100), (1, 1, 1), (97, 89, 83), (1000, 1000, 1001), (128, 64, 32)]:
        a = cp.random.uniform(-1, 1, (m, k)).astype(cp.float16)
        b = cp.random.uniform(-1, 1, (k, n)).astype(cp.float16)
        c = cp.empty((m, n), cp.float16)
        with stream:
            matmul(a, b, out=c, stream=stream)
        stream.synchronize()
        ref = a.astype(cp.float32) @ b.astype(cp.float32)
        assert float(cp.abs(c.astype(cp.float32) - ref).max()) <= 0.05 * max(1.0, k**0.5), (m, n, k)
