"""``ktune build`` on the CPU, end to end: tune cpu_matmul and cpu_conv2d for real on a few
shapes, build the library, and call it from C (static and shared, with no compiler on PATH),
from CMake and pkg-config, and from Python through ``ktune.kernels.load``, on tuned, untuned and
awkward shapes, against float64 references."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ktune.cli.app import main
from ktune.kernels import load

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

TUNED = ("64x64x64", "200x150x100", "300x300x300")
#: tuned, untuned, awkward: 1, primes, one past a tile, a degenerate middle size
MATMUL_SHAPES = [
    (64, 64, 64),
    (200, 150, 100),
    (300, 300, 300),
    (1, 1, 1),
    (1, 7, 1),
    (7, 13, 5),
    (97, 89, 83),
    (65, 65, 65),
    (129, 33, 17),
    (1000, 1, 1000),
    (1, 1000, 3),
    (3, 2, 1000),
    (250, 180, 120),
    (31, 257, 64),
    (128, 128, 1),
    (400, 50, 300),
    (17, 19, 23),
    (2, 512, 2),
    (333, 111, 222),
    (160, 160, 160),
]
#: N C H W K R S SH SW PH PW DH DW
CONV_SHAPES = [
    (1, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 1),
    (2, 4, 12, 10, 6, 3, 3, 1, 1, 0, 0, 1, 1),
    (1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1),
    (1, 3, 7, 11, 5, 3, 2, 2, 1, 1, 0, 1, 1),
    (3, 5, 13, 13, 7, 3, 3, 2, 2, 1, 1, 2, 2),
    (1, 16, 9, 9, 3, 1, 1, 1, 1, 0, 0, 1, 1),
    (2, 2, 17, 5, 9, 5, 1, 1, 1, 2, 0, 1, 1),
]


def ktune(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A log with cpu_matmul tuned on three shapes and cpu_conv2d on two, and its build."""
    root = tmp_path_factory.mktemp("ship")
    url = f"sqlite:///{root / 'log.db'}"
    for args in (
        ("--op", "cpu_matmul", "--shapes", ",".join(TUNED), "--budget", "4"),
        ("--op", "cpu_conv2d", "--shapes", "1x8x16x16x8x3x3,2x4x12x10x6x3x3", "--budget", "3"),
    ):
        assert main(["tune", *args, "--seed", "1", "--quiet", "--db", url]) == 0
    out = root / "kernels"
    assert main(["build", "--op", "cpu_matmul,cpu_conv2d", "--out", str(out), "--db", url]) == 0
    yield out, url


def test_the_build_holds_a_header_libraries_a_manifest_and_package_files(
    built: tuple[Path, str],
) -> None:
    out, _ = built
    header = (out / "include" / "ktune_kernels.h").read_text()
    assert (
        "int ktune_cpu_matmul_float32(int64_t M, int64_t N, int64_t K, const float *A, "
        "const float *B, float *C);" in header
    )
    assert "int ktune_cpu_conv2d_float32(" in header
    for name in ("libktune_kernels.a", "libktune_kernels.so"):
        assert (out / "lib" / name).stat().st_size > 0
    manifest = json.loads((out / "manifest.json").read_text())
    matmul = next(e for e in manifest["entries"] if e["name"] == "ktune_cpu_matmul_float32")
    served = [s for v in matmul["variants"] for s in v["serves"]]
    assert sorted(s["workload"] for s in served) == sorted(f"cpu_matmul/{s}/float32" for s in TUNED)
    assert all(s["time_ms"] > 0 and s["job_id"] and s["trial_id"] for s in served)
    assert sum(v["default"] for v in matmul["variants"]) == 1
    assert all(
        "-march=native" in v["measured_with"]["cflags"] for v in matmul["variants"] if v["serves"]
    )
    assert manifest["device"]["kind"] == "cpu" and manifest["toolchain"]["compiler_version"]
    assert (out / "lib" / "cmake" / "ktune_kernels" / "ktune_kernelsConfig.cmake").is_file()
    assert (out / "lib" / "pkgconfig" / "ktune_kernels.pc").is_file()


_C_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ktune_kernels.h"

static float value(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xffff) / 65536.0f - 0.5f;
}

static int matmul(int64_t M, int64_t N, int64_t K) {
    uint64_t state = (uint64_t)(M * 131 + N * 7 + K);
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N);
    for (int64_t i = 0; i < M * K; i++) A[i] = value(&state);
    for (int64_t i = 0; i < K * N; i++) B[i] = value(&state);
    int code = ktune_cpu_matmul_float32(M, N, K, A, B, C);
    if (code != 0) {
        printf("matmul %ldx%ldx%ld returned %d\n", (long)M, (long)N, (long)K, code);
        return 1;
    }
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, scale = 0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)A[i * K + k] * B[k * N + j];
                scale += fabs((double)A[i * K + k] * B[k * N + j]);
            }
            double err = fabs(C[i * N + j] - ref) / (scale + 1e-30);
            if (err > worst) worst = err;
        }
    free(A); free(B); free(C);
    if (worst > 1e-5) {
        printf("matmul %ldx%ldx%ld error %g\n", (long)M, (long)N, (long)K, worst);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int failed = 0, shapes = 0;
    for (int a = 1; a + 2 < argc; a += 3, shapes++)
        failed |= matmul(atoll(argv[a]), atoll(argv[a + 1]), atoll(argv[a + 2]));
    float x[4] = {1, 2, 3, 4}, c[4] = {7, 7, 7, 7};
    if (ktune_cpu_matmul_float32(2, 2, 2, NULL, x, c) == 0) { puts("null A accepted"); failed = 1; }
    if (ktune_cpu_matmul_float32(0, 2, 2, x, x, c) == 0) { puts("M = 0 accepted"); failed = 1; }
    if (ktune_cpu_matmul_float32(2, -1, 2, x, x, c) == 0) { puts("N < 0 accepted"); failed = 1; }
    for (int i = 0; i < 4; i++) if (c[i] != 7) { puts("C written on bad input"); failed = 1; }
    printf("%d shapes %s\n", shapes, failed ? "FAILED" : "ok");
    return failed;
}
"""


def _shape_args(shapes: list[tuple[int, int, int]]) -> list[str]:
    return [str(v) for s in shapes for v in s]


@pytest.mark.parametrize("link", ["static", "shared"])
def test_a_c_program_links_and_runs_every_shape_without_a_compiler(
    built: tuple[Path, str], tmp_path: Path, link: str
) -> None:
    out, _ = built
    source = tmp_path / "prog.c"
    source.write_text(_C_PROGRAM)
    exe = tmp_path / "prog"
    library = (
        [str(out / "lib" / "libktune_kernels.a"), "-fopenmp"]
        if link == "static"
        else [f"-L{out / 'lib'}", "-lktune_kernels", f"-Wl,-rpath,{out / 'lib'}"]
    )
    subprocess.run(
        ["cc", "-O1", str(source), f"-I{out / 'include'}", "-o", str(exe), *library, "-lm"],
        check=True,
    )
    if link == "static":
        needed = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
        assert "libktune_kernels" not in needed
    # no compiler reachable at run time: nothing is compiled when the kernels run
    env = {"PATH": str(tmp_path / "empty"), "OMP_NUM_THREADS": "2"}
    done = subprocess.run(
        [str(exe), *_shape_args(MATMUL_SHAPES)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(MATMUL_SHAPES)} shapes ok" in done.stdout


_C_CONV = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "ktune_kernels.h"

int main(int argc, char **argv) {
    int failed = 0, shapes = 0;
    for (int a = 1; a + 12 < argc; a += 13, shapes++) {
        int64_t v[13];
        for (int i = 0; i < 13; i++) v[i] = atoll(argv[a + i]);
        int64_t N = v[0], C = v[1], H = v[2], W = v[3], K = v[4], R = v[5], S = v[6];
        int64_t SH = v[7], SW = v[8], PH = v[9], PW = v[10], DH = v[11], DW = v[12];
        int64_t P = (H + 2 * PH - DH * (R - 1) - 1) / SH + 1;
        int64_t Q = (W + 2 * PW - DW * (S - 1) - 1) / SW + 1;
        float *x = malloc(sizeof(float) * N * C * H * W);
        float *w = malloc(sizeof(float) * K * C * R * S);
        float *y = malloc(sizeof(float) * N * K * P * Q);
        for (int64_t i = 0; i < N * C * H * W; i++) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
        for (int64_t i = 0; i < K * C * R * S; i++) w[i] = (float)((i * 11) % 13) / 13.0f - 0.5f;
        int code = ktune_cpu_conv2d_float32(N, C, H, W, K, R, S, SH, SW, PH, PW, DH, DW, x, w, y);
        if (code != 0) { printf("conv returned %d\n", code); failed = 1; continue; }
        for (int64_t n = 0; n < N; n++) for (int64_t k = 0; k < K; k++)
        for (int64_t p = 0; p < P; p++) for (int64_t q = 0; q < Q; q++) {
            double ref = 0;
            for (int64_t c = 0; c < C; c++) for (int64_t r = 0; r < R; r++)
            for (int64_t s = 0; s < S; s++) {
                int64_t h = p * SH - PH + r * DH, ww = q * SW - PW + s * DW;
                if (h >= 0 && h < H && ww >= 0 && ww < W)
                    ref += (double)x[((n * C + c) * H + h) * W + ww]
                           * w[((k * C + c) * R + r) * S + s];
            }
            if (fabs(y[((n * K + k) * P + p) * Q + q] - ref) > 1e-4 * (1 + fabs(ref))) failed = 1;
        }
        free(x); free(w); free(y);
    }
    float x[4] = {0}, y[4] = {5, 5, 5, 5};
    if (ktune_cpu_conv2d_float32(1, 1, 2, 2, 1, 3, 3, 1, 1, 0, 0, 1, 1, x, x, y) == 0) failed = 1;
    if (ktune_cpu_conv2d_float32(1, 1, 2, 2, 1, 1, 1, 0, 1, 0, 0, 1, 1, x, x, y) == 0) failed = 1;
    for (int i = 0; i < 4; i++) if (y[i] != 5) failed = 1;
    printf("%d shapes %s\n", shapes, failed ? "FAILED" : "ok");
    return failed;
}
"""


def test_a_c_program_runs_the_convolution_at_untuned_shapes(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    out, _ = built
    (tmp_path / "conv.c").write_text(_C_CONV)
    exe = tmp_path / "conv"
    subprocess.run(
        [
            "cc",
            "-O1",
            str(tmp_path / "conv.c"),
            f"-I{out / 'include'}",
            "-o",
            str(exe),
            str(out / "lib" / "libktune_kernels.a"),
            "-fopenmp",
            "-lm",
        ],
        check=True,
    )
    args = [str(v) for shape in CONV_SHAPES for v in shape]
    done = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env={"PATH": str(tmp_path / "none")}
    )
    assert done.returncode == 0 and f"{len(CONV_SHAPES)} shapes ok" in done.stdout, done.stdout


def test_pkg_config_and_cmake_find_the_library(built: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = built
    if shutil.which("pkg-config"):
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "ktune_kernels"],
            capture_output=True,
            text=True,
            env={**os.environ, "PKG_CONFIG_PATH": str(out / "lib" / "pkgconfig")},
            check=True,
        ).stdout
        assert "-lktune_kernels" in flags and "include" in flags
    if shutil.which("cmake") is None:
        pytest.skip("no cmake")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "prog.c").write_text(_C_PROGRAM)
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(use_ktune C)\n"
        "find_package(ktune_kernels REQUIRED)\nadd_executable(prog prog.c)\n"
        "target_link_libraries(prog PRIVATE ktune_kernels::static m)\n"
    )
    build = tmp_path / "cmake-build"
    subprocess.run(
        ["cmake", "-S", str(project), "-B", str(build), f"-DCMAKE_PREFIX_PATH={out}"],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    done = subprocess.run(
        [str(build / "prog"), "7", "13", "5", "64", "64", "64"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "2 shapes ok" in done.stdout, done.stdout


def test_python_loads_the_build_and_matches_numpy(built: tuple[Path, str]) -> None:
    out, _ = built
    kernels = load(out)
    assert set(kernels) == {"cpu_matmul_float32", "cpu_conv2d_float32"}
    matmul = kernels.cpu_matmul_float32
    rng = np.random.default_rng(0)
    for m, n, k in MATMUL_SHAPES:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        c = matmul(a, b)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        assert np.all(np.abs(c - ref) <= 1e-5 * scale + 1e-30), (m, n, k)
    with pytest.raises(ValueError, match="B has K = 3"):
        matmul(np.zeros((2, 4), np.float32), np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="float32"):
        matmul(np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="M = 5"):
        matmul(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), M=5)


def _conv_reference(x: np.ndarray, w: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, c, h, wd, k, r, s, sh, sw, ph, pw, dh, dw = shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    y = np.zeros((n, k, p, q))
    for i in range(r):
        for j in range(s):
            patch = xp[
                :,
                :,
                i * dh : i * dh + sh * (p - 1) + 1 : sh,
                j * dw : j * dw + sw * (q - 1) + 1 : sw,
            ]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64))
    return y


def test_the_convolution_runs_at_untuned_shapes_strides_padding_and_dilation(
    built: tuple[Path, str],
) -> None:
    conv = load(built[0]).cpu_conv2d_float32
    rng = np.random.default_rng(1)
    for shape in CONV_SHAPES:
        n, c, h, wd, k, r, s, sh, sw, ph, pw, dh, dw = shape
        x = rng.uniform(-1, 1, (n, c, h, wd)).astype(np.float32)
        w = rng.uniform(-1, 1, (k, c, r, s)).astype(np.float32)
        y = conv(x, w, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw)
        ref = _conv_reference(x, w, shape)
        assert y.shape == ref.shape and np.allclose(y, ref, rtol=1e-4, atol=1e-4), shape
    with pytest.raises(ValueError, match="P = "):
        conv(np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 3, 3), np.float32))


def test_the_dispatch_serves_each_tuned_shape_with_its_own_winner(built: tuple[Path, str]) -> None:
    out, _ = built
    kernels = load(out)
    entry = next(e for e in kernels.manifest["entries"] if e["name"] == "ktune_cpu_matmul_float32")
    for variant in entry["variants"]:
        for served in variant["serves"]:
            sizes = dict(zip(entry["sizes"], served["sizes"]))
            assert kernels.variant("cpu_matmul_float32", **sizes) == variant["index"]


def test_bad_builds_are_one_line_and_leave_the_output_as_it_was(
    capsys: pytest.CaptureFixture[str], built: tuple[Path, str], tmp_path: Path
) -> None:
    out, url = built
    before = (out / "manifest.json").read_bytes()
    cases = [
        (["--op", "cpu_nothing"], "unknown operator 'cpu_nothing'"),
        (["--op", "cpu_matmul", "--device", "Cray-1"], "the log knows no device 'Cray-1'"),
        (["--op", "cpu_matmul", "--dtype", "float64"], "no tuned float64 cpu_matmul"),
        (["--op", "matmul"], "no tuned matmul on any device"),
    ]
    for args, message in cases:
        code, _, err = ktune(capsys, "build", *args, "--out", str(out), "--db", url)
        assert code == 2 and message in err and err.count("\n") == 1, err
    assert (out / "manifest.json").read_bytes() == before
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    stranger = tmp_path / "mine"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("keep me")
    code, _, err = ktune(capsys, "build", "--op", "cpu_matmul", "--out", str(stranger), "--db", url)
    assert code == 2 and "not replacing it" in err
    assert (stranger / "notes.txt").read_text() == "keep me"
