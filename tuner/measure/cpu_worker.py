"""The CPU side of the ``cpu`` backend: compile, run, check and time one config (in a worker).

:class:`CpuMeasurer` is built inside a worker process (see :mod:`ktune.tuner.measure.pool`): it
makes the operator's inputs, computes the float64 reference and keeps pristine copies of the
outputs. Each call then

1. compiles the config's C source with the system C compiler into a shared library (cached by
   source and flags in the backend's directory);
2. loads it and runs it once on restored outputs, called as the operator says
   (``CpuOperator.call_values``: ktune's kernels take the problem's sizes first, a user's kernel
   its own pointers and scalars); a nonzero status (where the entry returns one) or a write past
   the end of an array (each array is followed by guard bytes, checked after the run) is a
   ``runtime_error``, a mismatch with the reference (the operator's :class:`Tolerance`) or a
   failed ``CpuOperator.verify`` is ``wrong_result``;
3. times it with ``perf_counter_ns``: warm-up runs, then repeats until a minimum count and a
   minimum total time, each preceded (untimed) by restoring the outputs and flushing every
   argument's cache lines (``clflush`` on x86, ``dc civac`` on Arm; elsewhere no flush, and
   the worker's spec says ``cache_flush: false``), as AutoTVM's CPU cache flush does;
4. unloads the library, so a long job does not map thousands of them (the OpenMP runtime stays:
   the worker keeps a library of its own that uses it).

A kernel that crashes takes the worker with it (the pool replaces it: ``runtime_error``); one
that never ends is killed after the backend's timeout.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ktune.search_space.operators.base import Arguments
from ktune.search_space.operators.cpu import CpuOperator
from ktune.search_space.operators.cpu import get as get_cpu_operator
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import error_text
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.measure.groups import run_in_group
from ktune.tuner.measure.timing import TimingSettings, repeat_timed

__all__ = [
    "DEFAULT_CFLAGS",
    "Compiler",
    "CompilerError",
    "CpuMeasureSpec",
    "CpuMeasurer",
    "compiler_from_env",
    "make_cpu_measurer",
]

#: flags of every compile: optimised for this CPU, OpenMP, a shared library
DEFAULT_CFLAGS = ("-O3", "-march=native", "-fopenmp", "-std=c11", "-fPIC", "-shared")
#: seconds one compile may take before it counts as a compile error
COMPILE_TIMEOUT_S = 120.0
#: built when a worker starts (a compiler that cannot build an OpenMP library stops the job
#: there) and kept loaded: its cache flush evicts a kernel's arguments between timed runs
_RUNTIME = r"""
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
int ktune_probe(void) { return omp_get_max_threads() > 0 ? 0 : 1; }
int ktune_can_flush(void) {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}
void ktune_flush(const void *p, size_t n) {
    uintptr_t line = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + n;
#if defined(__x86_64__) || defined(__i386__)
    for (; line < end; line += 64) __builtin_ia32_clflush((const void *)line);
    __builtin_ia32_mfence();
#elif defined(__aarch64__)
    for (; line < end; line += 64) __asm__ volatile("dc civac, %0" :: "r"(line) : "memory");
    __asm__ volatile("dsb ish" ::: "memory");
#else
    (void)line; (void)end;
#endif
}
"""


@dataclass(frozen=True)
class Compiler:
    """A C compiler command and its flags (``KTUNE_CC``, ``KTUNE_CFLAGS``)."""

    command: tuple[str, ...] = ("cc",)
    flags: tuple[str, ...] = DEFAULT_CFLAGS

    def version(self) -> str:
        """The first line of ``--version``, or an OSError when the compiler cannot be run."""
        done = subprocess.run(
            [*self.command, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        return (done.stdout.strip().splitlines() or [" ".join(self.command)])[0]

    def compile(self, code: str, output: Path) -> tuple[bool, str]:
        """Compile ``code`` to the shared library ``output``: (success, the compiler's messages)."""
        source = output.with_suffix(".c")
        source.write_text(code, encoding="utf-8")
        partial = output.with_suffix(f".{os.getpid()}.tmp")
        try:
            done = run_in_group(  # a timeout kills the compiler's whole process group
                [*self.command, *self.flags, str(source), "-o", str(partial)],
                timeout_s=COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return False, f"the compiler did not finish within {COMPILE_TIMEOUT_S:g} s"
        if done.returncode != 0:
            return False, done.stderr or done.stdout
        os.replace(
            partial, output
        )  # another worker may compile the same config: either copy will do
        return True, done.stderr

    def probe(self, directory: Path) -> Path:
        """Build ktune's small OpenMP runtime library in ``directory`` and return its path; a
        :class:`CompilerError` with the compiler's first words when it cannot."""
        library = directory / f"runtime{os.getpid()}.so"
        try:
            ok, messages = self.compile(_RUNTIME, library)
        except OSError as exc:
            ok, messages = False, str(exc)
        if not ok:
            raise CompilerError(
                f"{' '.join(self.command)} cannot build kernels with {' '.join(self.flags)}: "
                f"{error_text(messages, 2)}"
            )
        return library


class CompilerError(RuntimeError):
    """The compiler cannot build an OpenMP shared library with its flags."""


def compiler_from_env() -> Compiler:
    """``$KTUNE_CC`` (default ``cc``) with ``$KTUNE_CFLAGS`` (default :data:`DEFAULT_CFLAGS`);
    ``-shared -fPIC`` are always added, since the kernel is loaded as a library."""
    command = tuple(shlex.split(os.environ.get("KTUNE_CC", "") or "cc"))
    flags = (
        tuple(shlex.split(os.environ["KTUNE_CFLAGS"]))
        if os.environ.get("KTUNE_CFLAGS")
        else DEFAULT_CFLAGS
    )
    for required in ("-fPIC", "-shared"):
        if required not in flags:
            flags += (required,)
    return Compiler(command, flags)


@dataclass(frozen=True)
class CpuMeasureSpec:
    """What a CPU worker measures: a CPU operator (registered name, or an instance, which
    must then be picklable), the workload, where compiled kernels go, the compiler, timing
    settings and the seed of the inputs."""

    operator: str | CpuOperator
    workload_key: str
    workdir: str
    compiler: Compiler = field(default_factory=Compiler)
    settings: TimingSettings = field(default_factory=TimingSettings)
    seed: int = 0


def make_cpu_measurer(spec: CpuMeasureSpec, slot: int) -> CpuMeasurer:
    """Pool factory: ``functools.partial(make_cpu_measurer, spec)``."""
    return CpuMeasurer(spec)


class CpuMeasurer:
    """Measures configs of one workload on this CPU; built in the worker process."""

    def __init__(self, spec: CpuMeasureSpec) -> None:
        self.spec = spec
        self.op = (
            get_cpu_operator(spec.operator) if isinstance(spec.operator, str) else spec.operator
        )
        self.workload = Workload.from_key(spec.workload_key)
        self.info = cpu_spec()
        self.info["compiler"] = spec.compiler.version()
        self.workdir = Path(spec.workdir)
        # Kept loaded for the worker's life: it holds the OpenMP runtime, whose threads outlive
        # every kernel (unloading the last library that uses it would unmap their code).
        self.runtime = ctypes.CDLL(str(spec.compiler.probe(self.workdir)))
        self.runtime.ktune_flush.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.runtime.ktune_flush.restype = None
        self.flushes = spec.settings.flush_l2 and bool(self.runtime.ktune_can_flush())
        self.info["cache_flush"] = self.flushes
        args = self.op.arguments(self.workload, np.random.default_rng(spec.seed))
        self.references = {
            i: ref
            for i, ref in zip(args.outputs, self.op.reference(self.workload, args))
            if ref is not None
        }
        values = self.op.call_values(self.workload, args)
        guarded = {id(v): _Guarded(v) for v in values if isinstance(v, np.ndarray)}
        self.guarded = list(guarded.values())
        self.call_args = [
            ctypes.c_void_p(guarded[id(v)].data.ctypes.data)
            if isinstance(v, np.ndarray)
            else _c_value(v)
            for v in values
        ]
        self.argtypes = [type(a) for a in self.call_args]
        # the arguments in their own order, each array now the one in its guarded buffer
        self.args = [guarded[id(v)].data if id(v) in guarded else v for v in args.values]
        self.run_args = Arguments(tuple(self.args), args.outputs)
        self.pristine = {i: self.args[i].copy() for i in args.outputs}
        self.tolerance = self.op.tolerance(self.workload)

    def hello(self) -> dict[str, Any]:
        return self.info

    def __call__(self, config: Config) -> dict[str, Any]:
        result: dict[str, Any] = {
            "status": "ok",
            "time_ms": None,
            "times_ms": [],
            "compile_ms": 0.0,
            "bench_ms": 0.0,
            "error": "",
            "extra": {},
        }
        source = self.op.render(config, self.workload)
        key = hashlib.sha256(
            "\0".join(
                (source.code, *self.spec.compiler.command, *self.spec.compiler.flags)
            ).encode()
        )
        library = self.workdir / f"k{key.hexdigest()[:24]}.so"
        started = time.perf_counter()
        if not library.exists():
            ok, messages = self.spec.compiler.compile(source.code, library)
            if not ok:
                result.update(
                    status="compile_error",
                    error=error_text(messages),
                    compile_ms=(time.perf_counter() - started) * 1000,
                )
                return result
        result["compile_ms"] = (time.perf_counter() - started) * 1000
        bench = time.perf_counter()
        lib = ctypes.CDLL(str(library))
        try:
            kernel = getattr(lib, source.name, None)
            if kernel is None:
                result.update(
                    status="compile_error",
                    error=f"the compiled source defines no function {source.name!r}",
                )
                return result
            kernel.restype = ctypes.c_int if self.op.returns_status else None
            kernel.argtypes = self.argtypes
            self._measure(kernel, result)
        finally:
            result["bench_ms"] = (time.perf_counter() - bench) * 1000
            _unload(lib)
        return result

    # --- internals

    def _measure(self, kernel: Any, result: dict[str, Any]) -> None:
        call_args = self.call_args
        self._restore()
        code = kernel(*call_args)
        if self.op.returns_status and code != 0:
            result.update(status="runtime_error", error=f"the kernel returned {code}")
            return
        overrun = [i for i, g in enumerate(self.guarded) if not g.intact()]
        if overrun:
            result.update(
                status="runtime_error",
                error=f"the kernel wrote past the end of array argument {overrun[0]}",
            )
            return
        worst = self._check()
        result["extra"]["max_error_ratio"] = worst
        if worst > 1.0:
            result.update(status="wrong_result", error=self.tolerance.failure(worst))
            return
        try:
            wrong = self.op.verify(self.workload, self.run_args)
        except Exception as exc:  # noqa: BLE001 - the user's verify: its failure is the config's
            wrong = f"verify raised {type(exc).__name__}: {exc}"
        if wrong:
            result.update(status="wrong_result", error=error_text(wrong))
            return

        def timed() -> float:
            start = time.perf_counter_ns()
            kernel(*call_args)
            return (time.perf_counter_ns() - start) / 1e6

        times = repeat_timed(timed, self.spec.settings, self._prepare)
        result.update(times_ms=times, time_ms=float(np.median(times)))

    def _restore(self) -> None:
        for i, p in self.pristine.items():
            self.args[i][...] = p

    def _prepare(self) -> None:
        self._restore()
        if (
            self.flushes
        ):  # every argument leaves every cache level, as a kernel's inputs usually arrive
            for g in self.guarded:
                self.runtime.ktune_flush(g.data.ctypes.data, g.data.nbytes)

    def _check(self) -> float:
        return max(
            (self.tolerance.check(self.args[i], ref)[1] for i, ref in self.references.items()),
            default=0.0,
        )


#: bytes after each array that a kernel must leave as they were
GUARD_BYTES = 256
_GUARD = 0xA5
_SCALARS: dict[str, type[Any]] = {
    "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8,
    "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16,
    "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "bool": ctypes.c_bool,
}


def _c_value(value: Any) -> Any:
    """A call value that is not an array as ctypes passes it: a Python ``int`` as ``int64_t``
    (a size), a numpy scalar in its own C type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return ctypes.c_int64(value)
    if isinstance(value, np.generic) and value.dtype.name in _SCALARS:
        return _SCALARS[value.dtype.name](value.item())
    raise TypeError(f"cannot pass {value!r} to a C kernel (an array, an int, a numpy scalar)")


class _Guarded:
    """An array's contents in a 64-byte aligned buffer followed by :data:`GUARD_BYTES` of a
    known pattern; :meth:`intact` says whether a kernel left the guard alone."""

    def __init__(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        raw = np.full(array.nbytes + GUARD_BYTES + 64, _GUARD, dtype=np.uint8)
        start = -raw.ctypes.data % 64
        self.raw = raw
        self.guard = raw[start + array.nbytes : start + array.nbytes + GUARD_BYTES]
        self.data = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
        self.data[...] = array

    def intact(self) -> bool:
        return bool(np.all(self.guard == _GUARD))


def _unload(lib: ctypes.CDLL) -> None:
    """dlclose a kernel library after its last call (OpenMP's idle threads wait in the runtime,
    which the worker keeps loaded, not in the kernel)."""
    try:
        import _ctypes

        _ctypes.dlclose(lib._handle)
    except (ImportError, AttributeError, OSError):
        pass
