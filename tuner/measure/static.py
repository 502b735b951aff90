"""Static features of kernel configs without a GPU: compile, then read ptxas' resource report.

Each config is compiled for a target (``sm_80``) with NVRTC - the compiler the CuPy backend
uses on the GPU - loaded from the ``nvidia-cuda-nvrtc`` wheel or a CUDA toolkit, or with nvcc
when no NVRTC library is found. ``ptxas -v`` reports per entry point the registers, spill
stores and loads, stack frame and static shared memory; with the launch geometry that tells
which configs cannot launch on a device (too many registers or too much shared memory per
block) before any GPU time is spent. Compiles run on a small thread pool (NVRTC and nvcc
subprocesses both release the GIL).
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol

from ktune.search_space.operators.base import DeviceLimits, KernelSource, Launch

__all__ = [
    "CompileResult",
    "Compiler",
    "CompilerUnavailable",
    "NvccCompiler",
    "NvrtcCompiler",
    "StaticInfo",
    "analyze",
    "default_compiler",
    "launch_problem",
    "parse_ptxas",
]


class CompilerUnavailable(RuntimeError):
    """Neither NVRTC nor nvcc can be found on this machine."""


@dataclass(frozen=True)
class StaticInfo:
    """ptxas' report of one entry point (``ok`` False: it did not compile, see ``error``)."""

    ok: bool
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0  # static __shared__ only; dynamic comes from the launch
    constant_bytes: int = 0
    barriers: int = 0
    compile_ms: float = 0.0
    error: str = ""

    def features(self) -> dict[str, float]:
        return {
            "registers": float(self.registers),
            "spill_bytes": float(self.spill_stores + self.spill_loads),
            "stack_bytes": float(self.stack_bytes),
            "static_smem_bytes": float(self.shared_bytes),
        }


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    log: str
    seconds: float
    entries: dict[str, StaticInfo] = field(default_factory=dict)


class Compiler(Protocol):
    name: str

    def compile(self, code: str, arch: str, options: Sequence[str] = ()) -> CompileResult:
        """Compile ``code`` to a cubin for ``arch`` and report every entry point."""


# ---------------------------------------------------------------- ptxas report


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas(log: str) -> dict[str, StaticInfo]:
    """Per entry point name, the resources of ``ptxas -v`` output (nvcc's or NVRTC's log)."""
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in log.splitlines():
        entry = _ENTRY.search(line)
        if entry:
            current = found.setdefault(entry.group(1), {})
            continue
        if current is None:
            continue
        frame = _FRAME.search(line)
        if frame:
            current.update(stack=int(frame[1]), stores=int(frame[2]), loads=int(frame[3]))
        used = _USED.search(line)
        if used:
            current["registers"] = int(used[1])
            for key, pattern in (("smem", _SMEM), ("cmem", _CMEM), ("barriers", _BARRIERS)):
                hit = pattern.search(line)
                current[key] = int(hit[1]) if hit else 0
    return {
        name: StaticInfo(
            ok=True,
            registers=v.get("registers", 0),
            spill_stores=v.get("stores", 0),
            spill_loads=v.get("loads", 0),
            stack_bytes=v.get("stack", 0),
            shared_bytes=v.get("smem", 0),
            constant_bytes=v.get("cmem", 0),
            barriers=v.get("barriers", 0),
        )
        for name, v in found.items()
    }


def _errors(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if "error" in ln.lower()]
    return "; ".join(lines[:3])[:500] or log.strip()[:500]


# ---------------------------------------------------------------- compilers


class NvrtcCompiler:
    """NVRTC through ctypes (no GPU or driver needed)."""

    name = "nvrtc"

    def __init__(self, library: str | None = None) -> None:
        path = library or find_nvrtc()
        if path is None:
            raise CompilerUnavailable(
                "no NVRTC library found (pip install nvidia-cuda-nvrtc, or set KTUNE_NVRTC)"
            )
        folder = os.path.dirname(path)
        # libnvrtc dlopens its builtins by soname: load them first from the same folder
        for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))):
            if ".alt." not in builtins:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                break
        self._lib = ctypes.CDLL(path)
        self.path = path
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = f"{major.value}.{minor.value}"

    def compile(self, code: str, arch: str, options: Sequence[str] = ()) -> CompileResult:
        lib = self._lib
        prog = ctypes.c_void_p()
        started = time.perf_counter()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), b"kernel.cu", 0, None, None)
        if rc != 0:
            return CompileResult(False, f"nvrtcCreateProgram failed ({rc})", 0.0)
        try:
            opts = [f"-arch={arch}", "-Xptxas=-v", *options]
            argv = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
            rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace")
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))
        seconds = time.perf_counter() - started
        return CompileResult(rc == 0, log, seconds, parse_ptxas(log) if rc == 0 else {})


class NvccCompiler:
    """nvcc in a temporary directory, device code only (``-cubin``)."""

    name = "nvcc"

    def __init__(self, nvcc: str | None = None) -> None:
        path = nvcc or find_nvcc()
        if path is None:
            raise CompilerUnavailable("nvcc not found (set KTUNE_NVCC or CUDA_HOME)")
        self.path = path

    def compile(self, code: str, arch: str, options: Sequence[str] = ()) -> CompileResult:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ktune-nvcc-") as tmp:
            src = Path(tmp) / "kernel.cu"
            src.write_text(code)
            cmd = [
                self.path,
                "-cubin",
                f"-arch={arch}",
                "-Xptxas",
                "-v",
                *options,
                "-o",
                str(Path(tmp) / "k.cubin"),
                str(src),
            ]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
                ok, log = proc.returncode == 0, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired:
                ok, log = False, "nvcc timed out after 600 s"
        seconds = time.perf_counter() - started
        return CompileResult(ok, log, seconds, parse_ptxas(log) if ok else {})


def find_nvrtc() -> str | None:
    """libnvrtc: $KTUNE_NVRTC, the nvidia-cuda-nvrtc wheel, or a CUDA toolkit."""
    env = os.environ.get("KTUNE_NVRTC")
    if env:
        return env if os.path.exists(env) else None
    roots = [
        os.path.join(p, "nvidia")
        for p in sys.path
        if p and os.path.isdir(os.path.join(p, "nvidia"))
    ]
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    patterns = (
        [os.path.join(r, "*", "lib", "libnvrtc.so*") for r in roots]
        + [os.path.join(r, "cuda_nvrtc", "lib", "libnvrtc.so*") for r in roots]
        + [os.path.join(cuda_home, d, "libnvrtc.so*") for d in ("lib64", "lib")]
    )
    for pattern in patterns:
        hits = sorted(h for h in glob.glob(pattern) if ".alt." not in h)
        if hits:
            return hits[-1]
    return None


def find_nvcc() -> str | None:
    env = os.environ.get("KTUNE_NVCC")
    if env:
        return env if os.path.exists(env) else None
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = os.path.join(cuda_home, "bin", "nvcc")
    return shutil.which("nvcc") or (candidate if os.path.exists(candidate) else None)


@cache
def default_compiler() -> Compiler:
    """NVRTC when available (what the GPU backend compiles with), else nvcc."""
    try:
        return NvrtcCompiler()
    except (CompilerUnavailable, OSError):
        return NvccCompiler()


# ---------------------------------------------------------------- analysis


def analyze(
    sources: Sequence[KernelSource],
    arch: str,
    *,
    compiler: Compiler | None = None,
    batch: int | None = None,
    jobs: int = 2,
) -> list[StaticInfo]:
    """Compile every source for ``arch``; one :class:`StaticInfo` per source, in order.

    Batchable sources are compiled ``batch`` to a translation unit (renamed entry points in
    namespaces); a batch that fails is split until the failing configs are isolated. By
    default nvcc batches 8 (each call pays a large fixed start-up cost before any kernel) and
    NVRTC none (one config per call was fastest; docs/benchmarks.md, "GPU operators").
    """
    comp = compiler or default_compiler()
    if batch is None:
        batch = 8 if comp.name == "nvcc" else 1
    groups: list[list[int]] = []
    for i, src in enumerate(sources):
        last = groups[-1] if groups else None
        if (
            last is not None
            and src.batchable
            and sources[last[0]].batchable
            and sources[last[0]].options == src.options
            and len(last) < batch
        ):
            last.append(i)
        else:
            groups.append([i])
    results: list[StaticInfo | None] = [None] * len(sources)

    def run(group: list[int]) -> None:
        for i, info in zip(group, _compile_group([sources[i] for i in group], arch, comp)):
            results[i] = info

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(run, groups))
    return [r if r is not None else StaticInfo(False, error="not compiled") for r in results]


def _compile_group(sources: list[KernelSource], arch: str, comp: Compiler) -> list[StaticInfo]:
    if len(sources) == 1 and not sources[0].batchable:
        src = sources[0]
        res = comp.compile(src.code, arch, src.options)
        return [_entry(res, src.name, res.seconds)]
    names = [f"{s.name}_ktune{i}" for i, s in enumerate(sources)]
    code = "".join(s.renamed(n, f"ktune_cfg{i}") for i, (s, n) in enumerate(zip(sources, names)))
    res = comp.compile(code, arch, sources[0].options)
    if res.ok or len(sources) == 1:
        share = res.seconds / len(sources)
        return [_entry(res, n, share) for n in names]
    half = len(sources) // 2
    return _compile_group(sources[:half], arch, comp) + _compile_group(sources[half:], arch, comp)


def _entry(res: CompileResult, name: str, seconds: float) -> StaticInfo:
    if not res.ok:
        return StaticInfo(False, compile_ms=seconds * 1000, error=_errors(res.log))
    info = res.entries.get(name)
    if info is None:  # a C++ (mangled) name: match the one entry that contains it
        hits = [v for k, v in res.entries.items() if name in k]
        info = hits[0] if len(hits) == 1 else None
    if info is None:
        return StaticInfo(
            False, compile_ms=seconds * 1000, error=f"entry point {name!r} not in the compiled code"
        )
    return StaticInfo(
        True,
        info.registers,
        info.spill_stores,
        info.spill_loads,
        info.stack_bytes,
        info.shared_bytes,
        info.constant_bytes,
        info.barriers,
        seconds * 1000,
    )


def launch_problem(info: StaticInfo, launch: Launch, limits: DeviceLimits) -> str | None:
    """Why ``launch`` of a kernel with ``info``'s resources cannot run on ``limits``, or None."""
    threads = launch.threads_per_block
    if threads > limits.max_threads_per_block:
        return f"{threads} threads per block > {limits.max_threads_per_block}"
    if info.shared_bytes > limits.shared_mem_per_block:
        return f"{info.shared_bytes} bytes of static shared memory > {limits.shared_mem_per_block}"
    smem = info.shared_bytes + launch.shared_mem
    if smem > max(limits.shared_mem_per_block_optin, limits.shared_mem_per_block):
        return f"{smem} bytes of shared memory > {limits.shared_mem_per_block_optin}"
    # registers are allocated per warp in units of 256
    warps = -(-threads // limits.warp_size)
    per_warp = -(-info.registers * limits.warp_size // 256) * 256
    if (
        info.registers > limits.max_registers_per_thread
        or warps * per_warp > limits.registers_per_block
    ):
        return (
            f"{info.registers} registers x {threads} threads "
            f"> {limits.registers_per_block} per block"
        )
    return None
