"""The :class:`CpuOperator` interface: a kernel ktune tunes on the CPU (C, OpenMP).

A CPU operator turns a workload into a search space whose constraints come from the CPU's
limits (:class:`CpuLimits`: cores, vector registers, caches), renders C source for a config
(config values as ``#define``s above a template, as for GPU kernels), makes inputs and the
float64 reference, and counts FLOPs and bytes. The entry point takes the problem's sizes
(``int64_t``, as its :class:`EntryAbi` names them) and then the arguments' data pointers, and
returns 0, or nonzero when the kernel could not run; a config computes every shape (its space's
constraints only prune what is not worth measuring), unless ``requirements`` say otherwise.

An operator may be called otherwise (a user's kernel in the Kernel Tuner style takes its sizes as
``#define``s, and pointers and scalars in the user's order, and returns nothing): it then
overrides :meth:`CpuOperator.call_values` and sets ``returns_status`` to False.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, ClassVar

import numpy as np

from ktune.search_space.operators.base import Arguments, ShapedOperator, define_lines
from ktune.search_space.operators.forms import CPU_DTYPES
from ktune.search_space.parameters import Config, Value
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["CSource", "CpuLimits", "CpuOperator", "c_template"]

#: C type of each dtype a host kernel may take
C_TYPES = {"float32": "float", "float64": "double"}


@dataclass(frozen=True)
class CpuLimits:
    """What a CPU's spaces depend on: the cores a kernel may use, the bytes its vector
    registers hold together (the most accumulators a register block can keep), and the
    cache sizes in bytes (0 when unknown)."""

    cores: int = 1
    vector_bytes: int = 16
    vector_registers: int = 16
    l1d_bytes: int = 0
    l2_bytes: int = 0
    l3_bytes: int = 0

    @property
    def register_bytes(self) -> int:
        return self.vector_bytes * self.vector_registers

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> CpuLimits:
        """Limits from a detected CPU spec (:func:`ktune.tuner.measure.cpu_detect.cpu_spec`)."""
        return cls(**{k: int(spec[k]) for k in cls.__dataclass_fields__ if spec.get(k) is not None})

    def constants(self) -> dict[str, Value]:
        """Names the constraint expressions of host spaces use."""
        return {
            "cores": self.cores,
            "register_bytes": self.register_bytes,
            "vector_bytes": self.vector_bytes,
            "l1d_bytes": self.l1d_bytes,
            "l2_bytes": self.l2_bytes,
        }


@dataclass(frozen=True)
class CSource:
    """C for one config: ``defines`` (config values, problem constants, ``KERNEL_NAME``)
    followed by ``body``; ``name`` is the entry point."""

    name: str
    body: str
    defines: Mapping[str, Value] = field(default_factory=dict)

    @property
    def code(self) -> str:
        return define_lines(self.defines) + self.body


def c_template(name: str) -> str:
    """The text of a C template shipped in ``search_space/operators/cpu/c``."""
    return (
        resources.files("ktune.search_space.operators.cpu")
        .joinpath(f"c/{name}")
        .read_text(encoding="utf-8")
    )


class CpuOperator(ShapedOperator, ABC):
    """One kind of CPU kernel. Subclasses are stateless; each method takes the workload."""

    dtypes = CPU_DTYPES
    #: whether the entry point returns an ``int`` status (0: it ran); else its return is ignored
    returns_status: ClassVar[bool] = True

    def call_values(self, workload: Workload, args: Arguments) -> tuple[Any, ...]:
        """The entry point's arguments in call order: ``int`` values are ``int64_t`` sizes,
        numpy arrays are passed as data pointers, numpy scalars by value in their own type.
        By default the :class:`EntryAbi` convention: the sizes, then every argument's data."""
        return (*(int(s) for s in self.entry_sizes(workload)), *args.values)

    def verify(self, workload: Workload, args: Arguments) -> str | None:
        """Beyond the reference check: why the outputs of one run (``args``, after the run) are
        wrong, or None. None by default."""
        return None

    @abstractmethod
    def space(self, workload: Workload, limits: CpuLimits) -> SearchSpace:
        """The configs worth measuring for ``workload`` on a CPU with ``limits``."""

    @abstractmethod
    def render(self, config: Config, workload: Workload, *, specialise: bool = False) -> CSource:
        """C source of ``config``; the problem's sizes are run-time arguments of the entry point,
        or, with ``specialise``, compiled in as ``workload``'s (the arguments are then ignored)."""

    @abstractmethod
    def default_config(self, workload: Workload) -> Config:
        """A config that computes every shape of ``workload``'s dtype and layout, good enough
        where nothing tuned applies (the shipped dispatch's last resort)."""

    @abstractmethod
    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        """Random inputs and initialised outputs, in argument order (numpy arrays)."""

    @abstractmethod
    def reference(self, workload: Workload, args: Arguments) -> list[np.ndarray]:
        """Expected values of ``args.outputs`` in order, computed in float64."""

    @abstractmethod
    def flops(self, workload: Workload) -> float:
        """Useful floating-point operations of one run."""

    @abstractmethod
    def bytes_moved(self, workload: Workload) -> float:
        """Compulsory memory traffic of one run: each input read and each output written once."""

    def __repr__(self) -> str:
        return f"<CPU operator {self.name}>"
