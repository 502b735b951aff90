"""GPU variants of a build: a CUDA unit per tuned config, compiled ahead of time by nvcc.

:func:`variant_source` writes one unit: the operator's kernel for one config, renamed and
wrapped in a namespace of its own (so that any number of variants, of one operator or several,
link into one library), and a host launcher with C linkage::

    extern "C" int SYMBOL(cudaStream_t stream, int64_t SIZE..., const void *IN..., void *OUT...)

that checks the sizes (what the operator admits, and the config's requirements: it returns
``cudaErrorInvalidValue`` instead of computing a wrong result), derives the rest (a
convolution's P and Q), computes grid, block and dynamic shared memory from the operator's
:class:`~ktune.search_space.operators.base.Geometry` (the same expressions the tuner evaluated),
prepares the outputs a config accumulates into, and launches on ``stream`` with
``cudaLaunchKernel`` (the launch's own error is returned, not one left over from earlier
calls). It returns 0 or the ``cudaError_t``.

:func:`compile_objects` compiles units with nvcc into position-independent object files with
SASS for each requested architecture, for a static and a shared library linked with
``-lcudart``. No NVRTC and no compiler at run time.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from ktune.search_space.operators.base import Fill, Operator, OperatorError
from ktune.search_space.operators.expressions import C_HELPERS, int_expr
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload
from ktune.tuner.measure.static import find_nvcc

__all__ = ["CudaBuildError", "compile_objects", "normalise_arch", "variant_source"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ARCH = re.compile(r"(?:sm_|compute_)?(\d{2,3}[a-z]?)\Z")

#: grid limits of every CUDA device since compute capability 3.0
_GRID_MAX = ("INT64_C(2147483647)", "INT64_C(65535)", "INT64_C(65535)")


class CudaBuildError(RuntimeError):
    """A GPU variant cannot be built (no nvcc, an architecture it cannot target, a compile
    error); the message is one line."""


# ---------------------------------------------------------------- the translation unit


def variant_source(operator: Operator, workload: Workload, config: Config, symbol: str) -> str:
    """One CUDA C++ unit: ``config``'s kernel and the launcher ``symbol`` (see the module)."""
    if not _IDENT.match(symbol):
        raise OperatorError(f"launcher name {symbol!r} is not a C identifier")
    entry = operator.entry
    kernel, namespace = f"{symbol}_kernel", f"{symbol}_ns"
    source = operator.render(config, workload)
    if source.options:
        raise OperatorError(f"{operator.name}: kernels with compiler options cannot be shipped")
    knobs = {k: int(v) for k, v in config.items() if isinstance(v, (int, bool))}
    derived = [name for name, _ in entry.derived]
    variables = frozenset([*entry.sizes, *derived])

    def c(expression: str) -> str:
        return int_expr(expression).c(knobs, variables)

    ctypes = operator.pointer_ctypes(workload)
    params = ", ".join(
        [
            "cudaStream_t stream",
            *(f"int64_t {s}" for s in entry.sizes),
            *(f"void *{p.name}" if p.output else f"const void *{p.name}" for p in entry.pointers),
        ]
    )
    call = ", ".join(["stream", *entry.sizes, *(p.name for p in entry.pointers)])
    geometry = operator.geometry(workload)
    body: list[str] = []
    for name, expression in entry.derived:
        body.append(f"const int64_t {name} = {c(expression)};")
    for check in operator.admits:
        body.append(f"if (!{c(check)}) return (int)cudaErrorInvalidValue;  // admits: {check}")
    for check in operator.requirements:
        body.append(f"if (!{c(check)}) return (int)cudaErrorInvalidValue;  // requires: {check}")
    for p in entry.pointers:
        body.append(f"if ({p.name} == nullptr) return (int)cudaErrorInvalidValue;")
    for axis, (g, limit) in zip("xyz", zip(geometry.grid, _GRID_MAX)):
        body.append(f"const int64_t grid_{axis} = {c(g)};")
        body.append(
            f"if (grid_{axis} < 1 || grid_{axis} > {limit}) "
            "return (int)cudaErrorInvalidConfiguration;"
        )
    for axis, b in zip("xyz", geometry.block):
        body.append(f"const int64_t block_{axis} = {c(b)};")
    body.append(f"const int64_t smem = {c(geometry.shared_mem)};")
    body.append("cudaError_t err = cudaSuccess;")
    for fill in operator.fills(config, workload):
        body.extend(_fill_lines(fill, c(fill.count)))
    body.append("if (smem > 48 * 1024) {")
    body.append(
        f"    err = cudaFuncSetAttribute((const void *){kernel}, "
        "cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);"
    )
    body.append("    if (err != cudaSuccess) return (int)err;")
    body.append("}")
    args: list[str] = []
    for i, (p, ctype) in enumerate(zip(entry.pointers, ctypes)):
        const = "" if p.output else "const "
        body.append(f"{const}{ctype} *arg{i} = static_cast<{const}{ctype} *>({p.name});")
        args.append(f"(void *)&arg{i}")
    for name in (*entry.sizes, *derived):
        body.append(f"int size_{name} = (int){name};")
        args.append(f"(void *)&size_{name}")
    body.append(f"void *args[] = {{{', '.join(args)}}};")
    body.append(
        f"err = cudaLaunchKernel((const void *){kernel}, "
        "dim3((unsigned)grid_x, (unsigned)grid_y, (unsigned)grid_z), "
        "dim3((unsigned)block_x, (unsigned)block_y, (unsigned)block_z), "
        "args, (size_t)smem, stream);"
    )
    body.append("return (int)err;")
    launcher = "\n".join(f"    {line}" for line in body)
    return (
        f"// ktune variant {symbol}: {workload.key}\n"
        f"// config: {dict(config)}\n"
        "#include <cuda_runtime.h>\n#include <stdint.h>\n#include <limits>\n\n"
        f"{source.renamed(kernel, namespace)}\n"
        f"namespace {namespace} {{\n{C_HELPERS}{_FILL_KERNEL}\n"
        f"static int launch({params}) {{\n{launcher}\n}}\n}}  // namespace {namespace}\n\n"
        f'extern "C" int {symbol}({params}) {{\n'
        f"    return {namespace}::launch({call});\n}}\n"
    )


_FILL_KERNEL = """
__global__ void kt_fill(float *p, int64_t n, float value) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = value;
}
"""


def _fill_lines(fill: Fill, count: str) -> list[str]:
    """Host code that sets ``fill``'s output before the launch (on the same stream)."""
    size = {"float": 4, "unsigned short": 2}.get(fill.ctype)
    if size is None:
        raise OperatorError(f"cannot fill an output of C type {fill.ctype!r}")
    if fill.value == 0.0:
        return [
            f"err = cudaMemsetAsync({fill.pointer}, 0, (size_t)({count}) * {size}, stream);",
            "if (err != cudaSuccess) return (int)err;",
        ]
    if fill.ctype != "float":
        raise OperatorError(f"cannot fill {fill.ctype} with {fill.value}")
    value = (
        f"{'-' if fill.value < 0 else ''}std::numeric_limits<float>::infinity()"
        if math.isinf(fill.value)
        else f"{fill.value!r}f"
    )
    return [
        "{",
        f"    int64_t n = {count};",
        "    const unsigned blocks = (unsigned)kt_min((n + 255) / 256, INT64_C(1) << 20);",
        f"    float *data = static_cast<float *>({fill.pointer});",
        f"    float value = {value};",
        "    void *fill_args[] = {(void *)&data, (void *)&n, (void *)&value};",
        "    err = cudaLaunchKernel((const void *)kt_fill, dim3(blocks), dim3(256), fill_args,",
        "                           0, stream);",
        "    if (err != cudaSuccess) return (int)err;",
        "}",
    ]


# ---------------------------------------------------------------- compiling


def normalise_arch(arch: str) -> str:
    """``"sm_80"``, ``"80"`` or ``"compute_80"`` -> ``"80"``; :class:`CudaBuildError` else."""
    match = _ARCH.match(arch.strip())
    if not match:
        raise CudaBuildError(f"architecture {arch!r} is not like sm_80")
    return match.group(1)


@cache
def _targets(nvcc: str) -> frozenset[str]:
    """The architectures ``nvcc --list-gpu-arch`` names (``"80"``, ``"90"``, ...)."""
    try:
        proc = subprocess.run(
            [nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        raise CudaBuildError(f"cannot run nvcc ({nvcc}): {exc.strerror}") from None
    if proc.returncode != 0:
        raise CudaBuildError(f"{nvcc} --list-gpu-arch failed: {_first_error(proc.stderr)}")
    return frozenset(a.removeprefix("compute_") for a in proc.stdout.split())


def compile_objects(
    sources: Mapping[str, str],
    archs: Sequence[str],
    workdir: Path,
    nvcc: str | None = None,
) -> list[Path]:
    """Compile each unit (name -> CUDA source) to ``workdir/<name>.o`` with SASS for each of
    ``archs``; the objects in the order of ``sources``. Units compile in parallel."""
    path = nvcc or find_nvcc()
    if path is None or not os.path.exists(path):
        raise CudaBuildError(
            f"nvcc not found{f' at {nvcc}' if nvcc else ''} (set KTUNE_NVCC or CUDA_HOME)"
        )
    if not archs:
        raise CudaBuildError("no GPU architecture requested")
    wanted = [normalise_arch(a) for a in archs]
    known = _targets(path)
    missing = [a for a in wanted if a not in known]
    if missing:
        raise CudaBuildError(
            f"nvcc ({path}) cannot target sm_{missing[0]} "
            f"(it knows: {', '.join('sm_' + a for a in sorted(known))})"
        )
    for name in sources:
        if not _IDENT.match(name):
            raise CudaBuildError(f"unit name {name!r} is not a C identifier")
    workdir.mkdir(parents=True, exist_ok=True)
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in dict.fromkeys(wanted)]

    def build(name: str) -> Path:
        src, obj = workdir / f"{name}.cu", workdir / f"{name}.o"
        src.write_text(sources[name], encoding="utf-8")
        cmd = [path, "-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC", *gencode]
        try:
            proc = subprocess.run(
                [*cmd, "-o", str(obj), str(src)],
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise CudaBuildError(f"nvcc timed out on {name}") from None
        if proc.returncode != 0:
            raise CudaBuildError(
                f"nvcc failed on {name}: {_first_error(proc.stderr + proc.stdout)}"
            )
        return obj

    workers = max(1, min(len(sources), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(build, sources))


def _first_error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return ((errors or lines or ["no output"])[0])[:300]
