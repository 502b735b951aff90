"""``matmul``: C[M][N] = A[M][K] @ B[K][N], row-major; shape ``MxNxK``.

float32 runs the register-blocked SIMT GEMM (``cuda/gemm_simt.cuh``: vector loads, optional
double buffering, split-K); float16 runs tensor cores (``cuda/matmul_mma.cu``: ldmatrix +
mma.sync m16n8k16 with fp32 accumulation, a cp.async pipeline of 2-4 stages, grouped block
order). Both take M, N, K at run time and handle any sizes; vector widths are limited to what
the sizes align to (the operator's ``requirements``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ktune.search_space.operators.base import (
    DeviceLimits,
    Fill,
    Geometry,
    KernelSource,
    Operator,
    OperatorError,
    ceil_div,
    template,
)
from ktune.search_space.operators.forms import MatmulForm
from ktune.search_space.operators.gemm import GemmProblem
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["INT_SIZES", "Matmul", "simt_gemm_coverage"]

#: the most a size (or a GEMM dimension) may be where kernels index with 32-bit ints: below
#: 2**31 with room for a block's steps past the end
INT_LIMIT = 2**31 - 2**20

#: what a kernel with (M, N, K) as ints admits
INT_SIZES = tuple(f"1 <= {d} <= {INT_LIMIT}" for d in ("M", "N", "K"))

#: the requirement of vector loads along K and N (fp32 and fp16 alike)
_ALIGNED = MatmulForm.requirements[0]

_SIMT_PARAMS = [
    Parameter.of("block_size_x", [8, 16, 32]),
    Parameter.of("block_size_y", [4, 8, 16, 32]),
    Parameter.of("tile_size_x", [1, 2, 4, 8]),
    Parameter.of("tile_size_y", [1, 2, 4, 8]),
    Parameter.of("tile_size_k", [8, 16, 32]),
    Parameter.of("vector_width", [1, 2, 4]),
    Parameter.of("double_buffer", [0, 1]),
    Parameter.of("split_k", [1, 2, 4, 8]),
]

# Shared by every user of the SIMT GEMM core (matmul float32, conv2d).
SIMT_CONSTRAINTS = [
    "32 <= block_size_x * block_size_y <= max_threads",
    # static shared memory: A tile padded by 32 // tile_size_k per row, B tile (+ its pad)
    (
        "(double_buffer + 1) * tile_size_k * (block_size_y * tile_size_y + 32 // tile_size_k"
        " + block_size_x * tile_size_x + b_pad * (32 // tile_size_k)) * 4 <= max_static_smem"
    ),
    "tile_size_x * tile_size_y <= 64",
    (
        "block_size_x * block_size_y"
        " * (tile_size_x * tile_size_y + tile_size_x + tile_size_y + 16) <= max_regs"
    ),
]

_MMA_PARAMS = [
    Parameter.of("tile_size_y", [32, 64, 128, 256]),
    Parameter.of("tile_size_x", [32, 64, 128, 256]),
    Parameter.of("tile_size_k", [16, 32, 64]),
    Parameter.of("warp_tile_y", [16, 32, 64]),
    Parameter.of("warp_tile_x", [16, 32, 64]),
    Parameter.of("stages", [2, 3, 4]),
    Parameter.of("vector_width", [1, 2, 4, 8]),
    Parameter.of("group_m", [1, 8]),
]

_MMA_CONSTRAINTS = [
    "tile_size_y % warp_tile_y == 0 and tile_size_x % warp_tile_x == 0",
    (
        "32 <= (tile_size_y // warp_tile_y) * (tile_size_x // warp_tile_x) * 32"
        " <= min(max_threads, 512)"
    ),
    "stages * (tile_size_y * (tile_size_k + 8) + tile_size_k * (tile_size_x + 8)) * 2 <= max_smem",
    "warp_tile_y * warp_tile_x <= 4096",
    (
        "(tile_size_y // warp_tile_y) * (tile_size_x // warp_tile_x) * 32"
        " * (warp_tile_y * warp_tile_x // 32 + warp_tile_y // 4 + warp_tile_x // 4 + 32)"
        " <= max_regs"
    ),
    _ALIGNED,
]


class Matmul(MatmulForm, GemmProblem, Operator):
    summary = "C = A @ B, row-major; fp32 SIMT (split-K) or fp16 tensor cores (mma.sync)"
    admits = INT_SIZES

    def default_config(self, workload: Workload) -> Config:
        """Vector width 1 (any K and N), no split-K; middling tiles."""
        self.check(workload)
        if workload.dtype == "float16":
            return {
                "tile_size_y": 64,
                "tile_size_x": 64,
                "tile_size_k": 32,
                "warp_tile_y": 32,
                "warp_tile_x": 32,
                "stages": 3,
                "vector_width": 1,
                "group_m": 8,
            }
        return {
            "block_size_x": 16,
            "block_size_y": 16,
            "tile_size_x": 4,
            "tile_size_y": 4,
            "tile_size_k": 16,
            "vector_width": 1,
            "double_buffer": 1,
            "split_k": 1,
        }

    def geometry(self, workload: Workload) -> Geometry:
        if workload.dtype == "float16":
            threads = "(tile_size_y // warp_tile_y) * (tile_size_x // warp_tile_x) * 32"
            return Geometry(
                (
                    (
                        "((M + tile_size_y - 1) // tile_size_y)"
                        " * ((N + tile_size_x - 1) // tile_size_x)"
                    ),
                    "1",
                    "1",
                ),
                (threads, "1", "1"),
                "stages * (tile_size_y * (tile_size_k + 8) + tile_size_k * (tile_size_x + 8)) * 2",
            )
        return simt_geometry("M", "N")

    def fills(self, config: Config, workload: Workload) -> tuple[Fill, ...]:
        if workload.dtype == "float32" and int(config["split_k"]) > 1:
            return (Fill("C", "M * N", "float", 0.0),)
        return ()

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        self.check(workload)
        m, n, k = workload.shape
        constants: dict[str, Any] = {**limits.constants(), "M": m, "N": n, "K": k, "b_pad": 0}
        if workload.dtype == "float16":
            if limits.compute_capability < (8, 0):
                raise OperatorError(
                    f"matmul float16 needs tensor cores of sm_80 or newer, not {limits.arch}"
                )
            del constants["b_pad"]
            return SearchSpace(
                _MMA_PARAMS, _MMA_CONSTRAINTS, constants=constants, name=workload.key
            )
        constraints = SIMT_CONSTRAINTS + [
            "(block_size_x * tile_size_x) % vector_width == 0",
            "K % vector_width == 0 and N % vector_width == 0",
            "split_k == 1 or split_k * tile_size_k * 2 <= K",
        ]
        return SearchSpace(_SIMT_PARAMS, constraints, constants=constants, name=workload.key)

    def render(self, config: Config, workload: Workload) -> KernelSource:
        self.check(workload)
        defines = {"KERNEL_NAME": f"matmul_{workload.dtype}", **config}
        if workload.dtype == "float16":
            body = template("prelude.cuh") + template("matmul_mma.cu")
        else:
            body = template("prelude.cuh") + template("matmul_simt.cuh") + template("gemm_simt.cuh")
        return KernelSource(str(defines["KERNEL_NAME"]), body, defines)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        m, n, k = workload.shape
        c: dict[str, Any] = dict(config)
        if workload.dtype == "float16":
            bm, bn, bk = c["tile_size_y"], c["tile_size_x"], c["tile_size_k"]
            per_thread = c["warp_tile_y"] * c["warp_tile_x"] / 32
            splits = 1
        else:
            bm, bn = c["block_size_y"] * c["tile_size_y"], c["block_size_x"] * c["tile_size_x"]
            bk, per_thread, splits = (
                c["tile_size_k"],
                c["tile_size_x"] * c["tile_size_y"],
                c["split_k"],
            )
        item = self.item_bytes(workload)
        padded = ceil_div(m, bm) * bm * ceil_div(n, bn) * bn
        return {
            **super().derived_features(config, workload),
            "block_tile_m": float(bm),
            "block_tile_n": float(bn),
            "block_tile_k": float(bk),
            "outputs_per_thread": float(per_thread),
            # FLOPs per byte loaded into shared memory: the tile's arithmetic intensity
            "tile_intensity": 2.0 * bm * bn * bk / ((bm + bn) * bk * item),
            "tile_efficiency": m * n / padded,
            "k_tiles_per_block": float(ceil_div(ceil_div(k, splits), bk)),
        }

    def coverage(self, config: Config, workload: Workload) -> np.ndarray:
        """Counts over (M, N, K): how often A[m,k]*B[k,n] is accumulated into a stored C[m,n]."""
        m, n, k = workload.shape
        c: dict[str, Any] = dict(config)
        if workload.dtype == "float16":
            return _mma_coverage(c, m, n, k)
        return simt_gemm_coverage(c, m, n, k)


def simt_geometry(m: str, n: str, split_k: str = "split_k") -> Geometry:
    """Geometry of the SIMT GEMM core for a GEMM of ``m`` x ``n`` outputs (expressions)."""
    bm, bn = "(block_size_y * tile_size_y)", "(block_size_x * tile_size_x)"
    return Geometry(
        (f"(({m} + {bm} - 1) // {bm}) * (({n} + {bn} - 1) // {bn})", split_k, "1"),
        ("block_size_x", "block_size_y", "1"),
    )


def simt_gemm_coverage(c: dict[str, Any], m: int, n: int, k: int) -> np.ndarray:
    """Emulates ``gemm_simt.cuh``'s indexing: blocks, threads, register tile, K splits."""
    bx, by, tx_, ty_ = c["block_size_x"], c["block_size_y"], c["tile_size_x"], c["tile_size_y"]
    bm, bn, bk, split = by * ty_, bx * tx_, c["tile_size_k"], c.get("split_k", 1)
    grid_n = ceil_div(n, bn)
    k_chunk = ceil_div(ceil_div(k, split), bk) * bk
    counts = np.zeros((m, n, k), dtype=np.int32)
    blocks = np.arange(ceil_div(m, bm) * grid_n)
    # rows and columns one block's threads store: m0 + ty + i*by, n0 + tx + j*bx
    rows = ((blocks // grid_n) * bm)[:, None] + (
        np.arange(by)[:, None] + np.arange(ty_)[None, :] * by
    ).ravel()[None, :]
    cols = ((blocks % grid_n) * bn)[:, None] + (
        np.arange(bx)[:, None] + np.arange(tx_)[None, :] * bx
    ).ravel()[None, :]
    written = np.zeros((m, n), dtype=np.int32)
    for r, col in zip(rows, cols):
        rr, cc = np.meshgrid(r[r < m], col[col < n], indexing="ij")
        np.add.at(written, (rr.ravel(), cc.ravel()), 1)
    for z in range(split):
        kbeg, kend = z * k_chunk, min(k, z * k_chunk + k_chunk)
        if kend <= kbeg:
            continue
        # the K loop: tiles kbeg + t*bk, elements below kend
        ks = np.arange(kbeg, kbeg + ceil_div(kend - kbeg, bk) * bk)
        ks = ks[ks < kend]
        counts[:, :, ks] += written[:, :, None]
    return counts


def _mma_coverage(c: dict[str, Any], m: int, n: int, k: int) -> np.ndarray:
    """Emulates ``matmul_mma.cu``'s indexing: grouped block order, warps, mma fragments."""
    bm, bn, wm, wn, group = (
        c["tile_size_y"],
        c["tile_size_x"],
        c["warp_tile_y"],
        c["warp_tile_x"],
        c["group_m"],
    )
    grid_m, grid_n = ceil_div(m, bm), ceil_div(n, bn)
    pid = np.arange(grid_m * grid_n)
    in_group = group * grid_n
    first_m = (pid // in_group) * group
    group_rows = np.minimum(grid_m - first_m, group)
    pid_m = first_m + (pid % in_group) % group_rows
    pid_n = (pid % in_group) // group_rows
    warps = np.arange((bm // wm) * (bn // wn))
    wm0, wn0 = (warps // (bn // wn)) * wm, (warps % (bn // wn)) * wn
    lane = np.arange(32)
    # fragment rows: i*16 + lane/4 (+8); columns: j*8 + (lane%4)*2 (+1)
    frag_r = (np.arange(wm // 16)[:, None] * 16 + lane[None, :] // 4)[..., None] + np.array([0, 8])
    frag_c = (np.arange(wn // 8)[:, None] * 8 + (lane[None, :] % 4) * 2)[..., None] + np.array(
        [0, 1]
    )
    written = np.zeros((m, n), dtype=np.int32)
    for pm, pn in zip(pid_m, pid_n):
        for w in range(len(warps)):
            # pair each lane's rows with that lane's columns
            r = pm * bm + wm0[w] + frag_r  # (MI, 32, 2)
            col = pn * bn + wn0[w] + frag_c  # (NI, 32, 2)
            rr = r[:, None, :, :, None]  # (MI, 1, 32, 2, 1)
            cc = col[None, :, :, None, :]  # (1, NI, 32, 1, 2)
            rr, cc = np.broadcast_arrays(rr, cc)
            keep = (rr < m) & (cc < n)
            np.add.at(written, (rr[keep], cc[keep]), 1)
    # the K loop covers [0, KTILES*BK) with zeros past K: each k < K once
    return np.broadcast_to(written[:, :, None], (m, n, k)).copy()
