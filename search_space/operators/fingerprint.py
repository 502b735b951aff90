"""The kernel template of ktune's operators, as a hash: what a trial's time was measured with.

A trial's fingerprint (``ktune.db.fingerprints``) names its kernel template and toolchain, so
that a time measured with an older template or toolchain is told apart. The template's part is
:func:`kernel_hash`: a hash of the operator's version and the text of the template files its
kernels are rendered from (``cuda/*.cu*``, ``cpu/c/*.c``). Bump an operator's version here when
it renders its template differently (other defines, another launch) without the files
changing. Reading the files needs no kernel module, so a lookup computes it without numpy.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

__all__ = ["KERNELS", "kernel_hash"]

_GEMM = ("cuda/prelude.cuh", "cuda/gemm_simt.cuh")
#: operator -> (version, its template files under search_space/operators)
KERNELS: dict[str, tuple[int, tuple[str, ...]]] = {
    "matmul": (1, (*_GEMM, "cuda/matmul_simt.cuh", "cuda/matmul_mma.cu")),
    "conv2d": (1, (*_GEMM, "cuda/conv2d_simt.cuh")),
    "reduction": (1, ("cuda/prelude.cuh", "cuda/reduction.cu")),
    "softmax": (1, ("cuda/prelude.cuh", "cuda/softmax.cu")),
    "transpose": (1, ("cuda/prelude.cuh", "cuda/transpose.cu")),
    "cpu_matmul": (1, ("cpu/c/matmul.c",)),
    "cpu_conv2d": (1, ("cpu/c/conv2d.c",)),
}


@cache
def kernel_hash(operator: str) -> str | None:
    """16 hex digits naming ``operator``'s kernel template and version; None for an operator
    that is not ktune's (a recorded space, a custom kernel)."""
    found = KERNELS.get(operator)
    if found is None:
        return None
    version, files = found
    root = resources.files("ktune.search_space.operators")
    digest = hashlib.sha256(f"{operator} v{version}\n".encode())
    for name in files:
        digest.update(name.encode() + b"\0" + root.joinpath(name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]
