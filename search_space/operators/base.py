"""The :class:`Operator` interface: everything ktune needs to tune one kind of GPU kernel.

An operator turns a :class:`~ktune.search_space.workload.Workload` into a search space (whose
constraints come from the device's limits), renders CUDA C++ source for a config, gives the
launch geometry, makes inputs and the reference result, and counts FLOPs and bytes.

ktune's own operators take their problem sizes at run time: a kernel's parameters are its data
pointers in the order of the operator's :attr:`~Operator.entry`, then its sizes and derived
sizes, each an ``int``; the tuning knobs stay compile-time ``#define``s. Their launch geometry is
a :class:`Geometry` of integer expressions over knobs and sizes, so the tuner and a shipped
launcher (:mod:`ktune.tuner.shipping.cuda`) compute it from one text. :meth:`Operator.specialised`
compiles a workload's sizes in instead (``KT_FIXED_SHAPE``), for comparison.

Kernel sources are self-contained CUDA C++ (no ``#include``: fp16 conversions, ``cp.async``,
``ldmatrix`` and ``mma`` are inline PTX), so NVRTC and nvcc compile them identically. Config
values reach the source as ``#define``s named like the parameters (Kernel Tuner's convention);
template bodies define no macros of their own, so many configs can share one translation unit.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

import numpy as np

from ktune.search_space.operators.expressions import int_expr
from ktune.search_space.operators.forms import OperatorError, WorkloadForm, shape_of
from ktune.search_space.parameters import Config, Parameter, Value
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = [
    "Arguments",
    "DeviceLimits",
    "Fill",
    "Geometry",
    "KernelSource",
    "Launch",
    "Operator",
    "OperatorError",
    "ShapedOperator",
    "Tolerance",
    "ceil_div",
    "shape_of",
    "instantiate",
    "template",
]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class DeviceLimits:
    """The per-block limits a launch must respect (the subset of a device spec spaces need).

    ``shared_mem_per_block`` is the static ``__shared__`` limit; ``shared_mem_per_block_optin``
    the most dynamic shared memory a kernel can opt in to.
    """

    name: str = "sm_80"
    compute_capability: tuple[int, int] = (8, 0)
    max_threads_per_block: int = 1024
    shared_mem_per_block: int = 48 * 1024
    shared_mem_per_block_optin: int = 163 * 1024
    registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    warp_size: int = 32
    sm_count: int = 0
    l2_bytes: int = 0

    @property
    def arch(self) -> str:
        """``sm_80`` style target name for compilers."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    @classmethod
    def for_arch(cls, arch: str) -> DeviceLimits:
        """Limits of the reference GPU of a compute capability (``sm_80``: A100, ``sm_90``:
        H100)."""
        try:
            return _ARCH_LIMITS[arch]
        except KeyError:
            raise OperatorError(
                f"no reference limits for {arch!r} (known: {', '.join(_ARCH_LIMITS)})"
            ) from None

    @classmethod
    def from_spec(cls, spec: Any) -> DeviceLimits:
        """Adapt a device spec: an object with attributes or a mapping (the cost model's
        ``DeviceSpec``, whose sizes are in KiB, or the dict a CuPy worker detects, in bytes).
        Missing fields keep this class's defaults."""
        get = spec.get if isinstance(spec, Mapping) else (lambda k, d=None: getattr(spec, k, d))
        values: dict[str, Any] = {}
        for name, aliases in _SPEC_ALIASES.items():
            for key, scale in ((name, 1), *aliases):
                v = get(key, None)
                if v is not None:
                    values[name] = v * scale if scale != 1 else v
                    break
        cc = values.get("compute_capability")
        if isinstance(cc, str):  # "8.0" or "sm_80"
            digits = cc.removeprefix("sm_").replace(".", "")
            if not digits.isdigit() or len(digits) < 2:
                raise OperatorError(f"device spec: compute capability {cc!r} is not like 8.0")
            values["compute_capability"] = (int(digits[:-1]), int(digits[-1]))
        elif cc is not None:
            values["compute_capability"] = (int(cc[0]), int(cc[1]))
        for key, value in values.items():
            if key not in ("name", "compute_capability"):
                values[key] = int(value)
        values.setdefault(
            "shared_mem_per_block_optin",
            values.get("shared_mem_per_block", cls.shared_mem_per_block_optin),
        )
        return cls(**values)

    def constants(self) -> dict[str, Value]:
        """Names the constraint expressions of operator spaces use."""
        return {
            "max_threads": self.max_threads_per_block,
            "max_static_smem": self.shared_mem_per_block,
            "max_smem": max(self.shared_mem_per_block_optin, self.shared_mem_per_block),
            "max_regs": self.registers_per_block,
            "cc": self.compute_capability[0] * 10 + self.compute_capability[1],
        }


# field -> other names it goes by, with the factor to bytes (DeviceSpec sizes are in KiB)
_SPEC_ALIASES: dict[str, tuple[tuple[str, int], ...]] = {
    "name": (),
    "compute_capability": (),
    "max_threads_per_block": (),
    "shared_mem_per_block": (("shared_memory_per_block_kib", 1024),),
    "shared_mem_per_block_optin": (("shared_memory_per_block_optin_kib", 1024),),
    "registers_per_block": (),
    "max_registers_per_thread": (),
    "warp_size": (),
    "sm_count": (),
    "l2_bytes": (("l2_cache_kib", 1024),),
}

_ARCH_LIMITS = {
    "sm_75": DeviceLimits("sm_75", (7, 5), 1024, 48 * 1024, 64 * 1024, 65536, 255, 32, 40, 4 << 20),
    "sm_80": DeviceLimits(
        "sm_80", (8, 0), 1024, 48 * 1024, 163 * 1024, 65536, 255, 32, 108, 40 << 20
    ),
    "sm_86": DeviceLimits("sm_86", (8, 6), 1024, 48 * 1024, 99 * 1024, 65536, 255, 32, 84, 6 << 20),
    "sm_89": DeviceLimits(
        "sm_89", (8, 9), 1024, 48 * 1024, 99 * 1024, 65536, 255, 32, 128, 72 << 20
    ),
    "sm_90": DeviceLimits(
        "sm_90", (9, 0), 1024, 48 * 1024, 227 * 1024, 65536, 255, 32, 132, 50 << 20
    ),
}


@dataclass(frozen=True)
class Launch:
    """Launch geometry: grid and block (x, y, z) and dynamic shared memory in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


@dataclass(frozen=True)
class Geometry:
    """A launch as integer expressions (:mod:`~ktune.search_space.operators.expressions`) over
    knobs, entry sizes and derived sizes: grid and block (x, y, z), dynamic shared memory."""

    grid: tuple[str, str, str]
    block: tuple[str, str, str]
    shared_mem: str = "0"


@dataclass(frozen=True)
class Fill:
    """An output a config accumulates into (split-K, split rows): before each launch its
    ``count`` (an expression over sizes) elements of C type ``ctype`` must hold ``value``."""

    pointer: str
    count: str
    ctype: str
    value: float


@dataclass(frozen=True)
class KernelSource:
    """CUDA C++ for one config: ``defines`` (config values, problem constants, the entry point
    name as ``KERNEL_NAME``) followed by ``body``; ``name`` is the entry point."""

    name: str
    body: str
    defines: Mapping[str, Value] = field(default_factory=dict)
    options: tuple[str, ...] = ()
    #: False when the body must stand alone (user code with #include lines, C++ names)
    batchable: bool = True

    @property
    def code(self) -> str:
        return define_lines(self.defines) + self.body

    def renamed(self, name: str, namespace: str) -> str:
        """The source with entry point ``name``, wrapped in ``namespace`` and followed by
        ``#undef``s, so that several configs compile in one translation unit."""
        if not self.batchable:
            raise OperatorError(f"kernel {self.name!r} cannot share a translation unit")
        defines = {**self.defines, "KERNEL_NAME": name}
        undefs = "".join(f"#undef {k}\n" for k in defines)
        return f"{define_lines(defines)}namespace {namespace} {{\n{self.body}\n}}\n{undefs}"


def define_lines(defines: Mapping[str, Value]) -> str:
    return "".join(f"#define {k} {_c_literal(v)}\n" for k, v in defines.items())


def _c_literal(value: Value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return (
            repr(value) + "f"
            if math.isfinite(value)
            else ("(1.0f/0.0f)" if value > 0 else "(-1.0f/0.0f)")
        )
    return str(value)


_TINY = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class Tolerance:
    """``|out - ref| <= rtol * |ref| + atol * max|ref|`` elementwise (ref computed in float64);
    with ``atol_relative`` False the last term is plain ``atol`` (``numpy.allclose``)."""

    rtol: float
    atol: float
    atol_relative: bool = True

    #: elements compared at a time: bounds a check's float64 temporaries (a few hundred MB)
    #: whatever the size of the output
    chunk: ClassVar[int] = 1 << 24

    def check(self, out: Any, ref: Any, xp: Any = np) -> tuple[bool, float]:
        """Whether ``out`` passes, and the worst ratio of error to allowed error. ``xp`` is the
        array module that holds both (numpy, or cupy: then the comparison runs on the device
        and only the ratio comes back to the host)."""
        out_flat, ref_flat = xp.asarray(out).reshape(-1), xp.asarray(ref).reshape(-1)
        if out_flat.size != ref_flat.size:
            raise ValueError(f"output of {out_flat.size} items, reference of {ref_flat.size}")
        spans = [slice(i, i + self.chunk) for i in range(0, ref_flat.size, self.chunk)]
        scale = 1.0
        if self.atol_relative and spans:
            scale = max(float(xp.max(xp.abs(ref_flat[s]))) for s in spans)
        worst = 0.0
        for span in spans:
            ref64 = ref_flat[span].astype(xp.float64, copy=False)  # references are float64
            err = xp.abs(out_flat[span].astype(xp.float64) - ref64)
            allowed = self.rtol * xp.abs(ref64) + (self.atol * scale + _TINY)
            with np.errstate(invalid="ignore"):
                ratio = xp.where(xp.isfinite(err), err / allowed, xp.inf)
            most = float(xp.max(ratio))
            worst = math.inf if math.isnan(most) else max(worst, most)  # NaN fails
        return worst <= 1.0, worst

    def failure(self, worst: float) -> str:
        """What a trial's error says when the worst ratio of :meth:`check` is above 1."""
        return (
            f"output differs from the reference: worst error {worst:.3g} x the tolerance "
            f"(rtol {self.rtol:g}, atol {self.atol:g})"
        )


@dataclass(frozen=True)
class Arguments:
    """Kernel arguments in call order (host arrays and numpy scalars) and which arrays the
    kernel writes (``outputs``: restored before each run, checked against the reference)."""

    values: tuple[Any, ...]
    outputs: tuple[int, ...]


_DTYPES: dict[str, type[np.floating[Any]]] = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
}


class ShapedOperator(WorkloadForm):
    """What every kind of kernel shares, on a GPU or a CPU: its workloads' form (inherited from
    :mod:`~ktune.search_space.operators.forms`), a one-line summary, and the tolerance its
    results are checked with."""

    summary: ClassVar[str] = ""

    def np_dtype(self, workload: Workload) -> type[np.floating[Any]]:
        return _DTYPES[workload.dtype]

    def item_bytes(self, workload: Workload) -> int:
        return int(np.dtype(self.np_dtype(workload)).itemsize)

    def bytes_moved(self, workload: Workload) -> float:
        """Compulsory memory traffic of one run: each input read and each output written once
        (so, the bytes of the kernel's arguments)."""
        raise NotImplementedError

    def footprint(self, workload: Workload) -> int:
        """About the most host memory one measurement of ``workload`` holds at once, in bytes:
        its arguments (:meth:`bytes_moved`) and their float64 copies (random inputs are drawn
        in float64; the reference is computed in float64). Known from the shape alone, so a
        submission can refuse a workload no runner could hold before anything is allocated."""
        moved = int(self.bytes_moved(workload))
        return moved + moved * 8 // self.item_bytes(workload)

    def tolerance(self, workload: Workload) -> Tolerance:
        """float32: rtol 1e-4; float64: 1e-10; float16: 2e-3 (atol likewise, relative to
        max|ref|)."""
        if workload.dtype == "float64":
            return Tolerance(1e-10, 1e-12)
        return Tolerance(1e-4, 1e-5) if workload.dtype == "float32" else Tolerance(2e-3, 2e-3)


class Operator(ShapedOperator, ABC):
    """One kind of GPU kernel. Subclasses are stateless; each method takes the workload."""

    def matrix_space(
        self,
        workload: Workload,
        limits: DeviceLimits,
        parameters: Sequence[Parameter],
        constraints: Sequence[str],
    ) -> SearchSpace:
        """The space of a ``ROWSxCOLS`` operator: constraints may use ``ROWS``, ``COLS``,
        ``elem_bytes`` and the limits' constants."""
        self.check(workload)
        rows, cols = workload.shape
        constants = {
            **limits.constants(),
            "ROWS": rows,
            "COLS": cols,
            "elem_bytes": self.item_bytes(workload),
        }
        return SearchSpace(parameters, constraints, constants=constants, name=workload.key)

    # --- the interface

    @abstractmethod
    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        """The configs worth measuring for ``workload`` on a device with ``limits``."""

    @abstractmethod
    def render(self, config: Config, workload: Workload) -> KernelSource:
        """CUDA source of ``config`` specialised to ``workload``."""

    def launch(self, config: Config, workload: Workload) -> Launch:
        """Grid, block and dynamic shared memory of ``config``: :meth:`geometry` evaluated."""
        geo = self.geometry(workload)
        env = {**self.sizes(workload), **_numeric(config)}
        grid = tuple(int_expr(e).value(env) for e in geo.grid)
        block = tuple(int_expr(e).value(env) for e in geo.block)
        return Launch(grid, block, int_expr(geo.shared_mem).value(env))  # type: ignore[arg-type]

    @abstractmethod
    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        """Random inputs and initialised outputs, in kernel-argument order."""

    @abstractmethod
    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        """Expected values of ``args.outputs`` in order, computed in float64 with ``xp``
        (numpy, or cupy on a GPU) from the arrays of ``args``."""

    @abstractmethod
    def flops(self, workload: Workload) -> float:
        """Useful floating-point operations of one run."""

    @abstractmethod
    def bytes_moved(self, workload: Workload) -> float:
        """Compulsory DRAM traffic of one run: each input read and each output written once."""

    # --- run-time sizes and shipping (ktune's own operators; a custom kernel has none)

    # (the C entry point, ``entry``, and the ``requirements`` a config must meet at a shape
    # come with the operator's form: :mod:`~ktune.search_space.operators.forms`)
    #: expressions over sizes that the kernels' 32-bit index arithmetic needs (the shapes the
    #: operator admits at all); a shipped launcher refuses other sizes
    admits: ClassVar[tuple[str, ...]] = ()

    def geometry(self, workload: Workload) -> Geometry:
        """The launch of any config of ``workload``'s dtype and layout, as expressions."""
        raise NotImplementedError(f"{self.name} gives its launch directly")

    def default_config(self, workload: Workload) -> Config:
        """A config whose requirements hold at every admitted shape (the dispatch's fallback)."""
        raise NotImplementedError(f"{self.name} has no default config")

    def pointer_ctypes(self, workload: Workload) -> tuple[str, ...]:
        """C element type of each of ``entry.pointers`` (``float``, ``unsigned short`` for
        fp16 bits), as the kernel takes them."""
        elem = "float" if workload.dtype == "float32" else "unsigned short"
        return tuple(elem for _ in self.entry.pointers)

    def fills(self, config: Config, workload: Workload) -> tuple[Fill, ...]:
        """Outputs ``config`` accumulates into, with the value they must hold beforehand
        (:meth:`arguments` initialises them so)."""
        return ()

    def kernel_sizes(self, workload: Workload) -> tuple[np.int32, ...]:
        """The kernel's trailing ``int`` arguments: the sizes, then the derived sizes."""
        return tuple(np.int32(v) for v in self.sizes(workload).values())

    def requirements_met(self, config: Config, workload: Workload) -> bool:
        """Whether ``config`` computes a correct result at ``workload``'s shape."""
        env = {**self.sizes(workload), **_numeric(config)}
        return all(int_expr(r).value(env) for r in self.requirements)

    def specialised(self, config: Config, workload: Workload) -> KernelSource:
        """:meth:`render` with the workload's sizes compiled in (``KT_FIXED_SHAPE``,
        ``KT_<size>``): the kernel still takes, and ignores, its size arguments."""
        source = self.render(config, workload)
        fixed = {f"KT_{k}": v for k, v in self.sizes(workload).items()}
        defines = {**source.defines, "KT_FIXED_SHAPE": 1, **fixed}
        return KernelSource(source.name, source.body, defines, source.options, source.batchable)

    def derived_features(self, config: Config, workload: Workload) -> dict[str, float]:
        """Operator-specific features of a config for the cost model (floats, by name)."""
        launch = self.launch(config, workload)
        return {
            "threads_per_block": float(launch.threads_per_block),
            "blocks": float(launch.blocks),
            "dynamic_smem_bytes": float(launch.shared_mem),
            "flops": float(self.flops(workload)),
            "bytes": float(self.bytes_moved(workload)),
        }

    def coverage(self, config: Config, workload: Workload) -> np.ndarray:
        """How many times the launch writes each output element (host emulation of the
        kernel's index arithmetic); an exact cover is all ones."""
        raise NotImplementedError(f"{self.name} has no host emulation of its index mapping")

    def __repr__(self) -> str:
        return f"<operator {self.name}>"


def _numeric(config: Config) -> dict[str, int]:
    """The integer knobs of a config (expressions read no strings)."""
    return {k: int(v) for k, v in config.items() if isinstance(v, (int, bool))}


def instantiate(target: str) -> Any:
    """An instance of the class a registry names as ``"module:Class"`` (imported on first use)."""
    from importlib import import_module

    module, cls = target.split(":")
    return getattr(import_module(module), cls)()


def template(name: str) -> str:
    """The text of a CUDA template shipped in ``search_space/operators/cuda``."""
    return (
        resources.files("ktune.search_space.operators")
        .joinpath(f"cuda/{name}")
        .read_text(encoding="utf-8")
    )


def param_range(lo: int, hi: int) -> list[int]:
    """Powers of two from ``lo`` to ``hi`` inclusive."""
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out
