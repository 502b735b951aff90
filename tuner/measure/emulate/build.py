"""Compiling a kernel for the emulation: g++, the runtime linked in, cached by content.

The kernel's translation unit is the emulation header, the translated source and a two-line
glue (``kt_entry_thread`` calls the kernel with packed arguments), built at ``-O0`` with
``-fsanitize=thread`` instrumentation (its hooks are the runtime's checks; at ``-O0`` every
access keeps the width the source wrote, so a misaligned vector load is seen as one).
The runtime (``runtime/kt_runtime.cpp``) is compiled once per content into an object that
every kernel library links. Libraries live in a cache folder keyed by a hash of everything
that went into them, so a config compiles once whatever the shapes it runs at.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ktune.search_space.operators.base import KernelSource
from ktune.tuner.measure.emulate.translate import translate

__all__ = ["CompileError", "EmulatedKernel", "SharedArray", "cache_dir", "compile_kernel"]

# Static locals of inline functions (a kernel's __shared__ arrays) are GNU-unique symbols by
# default, which the dynamic linker binds process-wide: every loaded kernel would share the
# first one's. -fno-gnu-unique and hidden inline symbols keep each library's own.
_KERNEL_FLAGS = (
    "-std=c++17",
    "-O0",
    "-fPIC",
    "-fsanitize=thread",
    "-fno-gnu-unique",
    "-fvisibility-inlines-hidden",
    "-w",
)
_RUNTIME_FLAGS = ("-std=c++17", "-O1", "-fPIC", "-w")


class CompileError(RuntimeError):
    """g++ refused the translated kernel (or the emulation cannot translate it)."""


@dataclass(frozen=True)
class SharedArray:
    """A static ``__shared__`` array: byte offset in section ``kt_shared``, size, name."""

    offset: int
    size: int
    name: str


@dataclass(frozen=True)
class EmulatedKernel:
    """A compiled kernel library, its entry point's name and its static shared arrays."""

    library: Path
    name: str
    shared: tuple[SharedArray, ...]

    @property
    def static_shared_bytes(self) -> int:
        return sum(a.size for a in self.shared)


def cache_dir() -> Path:
    """``$KTUNE_EMULATE_CACHE``, else ``$XDG_CACHE_HOME/ktune/emulate`` (``~/.cache``)."""
    env = os.environ.get("KTUNE_EMULATE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ktune" / "emulate"


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        raise CompileError("the emulation needs g++ (set CXX to another GCC)")
    return cxx


def _runtime_files() -> tuple[str, str]:
    folder = resources.files("ktune.tuner.measure.emulate").joinpath("runtime")
    header = folder.joinpath("kt_cuda.h").read_text(encoding="utf-8")
    runtime = folder.joinpath("kt_runtime.cpp").read_text(encoding="utf-8")
    return header, runtime


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _run(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        raise CompileError(f"{what}: " + "\n".join(lines[:12]))


def _atomic_write(target: Path, build: Callable[[Path], None]) -> None:
    """Build into a temporary name next to ``target`` and rename (parallel tests share it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=target.suffix)
    os.close(fd)
    try:
        build(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _runtime_object(cxx: str, folder: Path) -> Path:
    header, runtime = _runtime_files()
    obj = folder / f"runtime-{_digest(cxx, header, runtime, *_RUNTIME_FLAGS)}.o"
    if not obj.exists():
        src = folder / f"{obj.stem}.cpp"
        _write(folder / "kt_cuda.h", header)
        _write(src, runtime)
        _atomic_write(
            obj,
            lambda out: _run(
                [cxx, *_RUNTIME_FLAGS, "-I", str(folder), "-c", str(src), "-o", str(out)],
                "the emulation runtime does not compile",
            ),
        )
    return obj


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + f".{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def kernel_unit(source: KernelSource) -> str:
    """The C++ translation unit of ``source`` for the emulation: the translated source, then
    the entry the runtime calls in each thread, its arity and its ``__launch_bounds__``
    (the most threads per block a GPU launches it with; 0 when it gives none)."""
    code = translate(source.code)
    bounds = _launch_bounds(code)
    return (
        '#include "kt_cuda.h"\n'
        f"{code}\n"
        f'extern "C" void kt_entry_thread(void** argv) {{ kt::call({source.name}, argv); }}\n'
        f'extern "C" int kt_entry_arity() {{ return kt::arity({source.name}); }}\n'
        f'extern "C" int kt_entry_launch_bounds() {{ return (int)({bounds}); }}\n'
    )


def _launch_bounds(code: str) -> str:
    """The max-threads expression of the source's ``__launch_bounds__`` ("0" without one)."""
    m = re.search(r"__launch_bounds__\s*\(", code)
    if not m:
        return "0"
    depth, i = 1, m.end()
    while i < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    args = code[m.end() : i - 1]
    depth, cut = 0, len(args)
    for j, c in enumerate(args):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            cut = j
            break
    return args[:cut].strip() or "0"


def compile_kernel(source: KernelSource, folder: Path | None = None) -> EmulatedKernel:
    """The emulation library of ``source`` (compiled now, or found in the cache)."""
    folder = folder or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    cxx = _compiler()
    try:
        unit = kernel_unit(source)
    except ValueError as exc:
        raise CompileError(str(exc)) from None
    runtime = _runtime_object(cxx, folder)
    header, _ = _runtime_files()
    lib = folder / f"k-{_digest(cxx, header, unit, runtime.name, *_KERNEL_FLAGS)}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src, obj = Path(tmp) / "kernel.cpp", Path(tmp) / "kernel.o"
            src.write_text(unit, encoding="utf-8")
            _run(
                [cxx, *_KERNEL_FLAGS, "-I", str(folder), "-c", str(src), "-o", str(obj)],
                f"kernel {source.name} does not compile for the emulation",
            )
            _atomic_write(
                lib,
                lambda out: _run(
                    [cxx, "-shared", "-o", str(out), str(obj), str(runtime), "-lm", "-Wl,-z,defs"],
                    f"kernel {source.name} does not link for the emulation",
                ),
            )
    return EmulatedKernel(lib, source.name, _shared_arrays(lib))


def _shared_arrays(lib: Path) -> tuple[SharedArray, ...]:
    """The static ``__shared__`` arrays of ``lib`` from its symbol table (guards left out)."""
    done = subprocess.run(
        ["nm", "-S", "-C", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    )
    bounds: dict[str, int] = {}
    symbols = []
    for line in done.stdout.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 3 and parts[2] in ("__start_kt_shared", "__stop_kt_shared"):
            bounds[parts[2]] = int(parts[0], 16)
        if len(parts) == 4:
            symbols.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    if len(bounds) != 2:
        return ()
    start, end = bounds["__start_kt_shared"], bounds["__stop_kt_shared"]
    out = []
    for addr, size, name in symbols:
        if start <= addr < end and "kt_guard_" not in name and size > 0:
            short = name.rsplit("::", 1)[-1]
            out.append(SharedArray(addr - start, size, f"__shared__ {short}"))
    return tuple(sorted(out, key=lambda a: a.offset))
