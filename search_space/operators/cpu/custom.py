"""A user's own C kernel as a CPU operator, in the Kernel Tuner style.

The kernel is the user's C function, called with the user's arguments in their order: numpy
arrays as pointers, numpy scalars by value (``int32_t``, ``float``, ...); its return value is
ignored. Its problem size and the config's values reach the source as ``#define``s, as in
Kernel Tuner (``problem_size_x``/``_y``/``_z`` besides every tuned parameter), so the sizes are
compile-time constants and the entry point takes no size arguments. What a kernel is (source,
parameters, restrictions, arguments, answer) is a :class:`CustomOperator`, whose checks it
shares; the space is built for this machine's CPU (its restrictions may name ``cores``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ktune.search_space.operators.base import Arguments, OperatorError, Tolerance
from ktune.search_space.operators.cpu.base import CpuLimits, CpuOperator, CSource
from ktune.search_space.operators.custom import CustomOperator
from ktune.search_space.operators.entry import EntryAbi, Pointer
from ktune.search_space.parameters import Config, Value
from ktune.search_space.predicates import Predicate, keep_where
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["CustomCpuOperator", "Verify"]

#: ``verify(answer, outputs, atol) -> bool``, as Kernel Tuner calls it: ``answer`` and
#: ``outputs`` hold one entry per kernel argument (None where no answer is given)
Verify = Callable[[Sequence[Any], Sequence[Any], float], Any]

_AXES = ("problem_size_x", "problem_size_y", "problem_size_z")


class CustomCpuOperator(CpuOperator):
    """``kernel`` (its source is C) measured on the CPU; ``predicates``: restrictions given as
    Python callables (a config they reject, or that makes one raise, is not in the space);
    ``verify``: a Python check of the outputs beside (or instead of) the answer. Both run in
    the measuring process, so they must be picklable (module-level functions)."""

    returns_status = False

    def __init__(
        self,
        kernel: CustomOperator,
        *,
        predicates: Sequence[Predicate] = (),
        verify: Verify | None = None,
    ) -> None:
        self.kernel = kernel
        self.name = kernel.name  # type: ignore[misc]  # an instance, not a registered class
        self.dims = tuple(_AXES[: len(kernel.problem_size)])  # type: ignore[misc]
        self.dtypes = kernel.dtypes  # type: ignore[misc,assignment]
        self.predicates = tuple(predicates)
        self.verify_fn = verify
        self.entry = EntryAbi(  # type: ignore[misc]
            (),
            tuple(
                Pointer(f"arg{i}", output=i in kernel.outputs)
                for i, v in enumerate(kernel.values)
                if isinstance(v, np.ndarray)
            ),
        )
        for i, v in enumerate(kernel.values):
            if not isinstance(v, np.ndarray | np.generic):
                raise OperatorError(
                    f"{kernel.name}: argument {i} is {type(v).__name__}: give numpy arrays or "
                    "numpy scalars (np.int32(n), np.float32(x)), which say their C type"
                )
        #: what the last space's predicates rejected by raising (the first error), once
        self.predicate_error: str | None = None

    # --- the workload is the kernel's own

    def workload(
        self, shape: Sequence[int] | str | None = None, dtype: str = "", layout: str = ""
    ) -> Workload:
        return self.kernel.workload()

    def check(self, workload: Workload) -> None:
        if workload.key != self.kernel.workload().key:
            raise OperatorError(
                f"{self.name} tunes {self.kernel.workload().key}, not {workload.key}"
            )

    def space(self, workload: Workload, limits: CpuLimits) -> SearchSpace:
        kernel = self.kernel
        names = {p.name for p in kernel.parameters}
        constants = {**limits.constants(), **self._sizes()}
        space = SearchSpace(
            kernel.parameters,
            kernel.restrictions,
            constants={k: v for k, v in constants.items() if k not in names},
            name=kernel.name,
        )
        if self.predicates:
            space, self.predicate_error = keep_where(space, self.predicates)
        return space

    def render(self, config: Config, workload: Workload, *, specialise: bool = False) -> CSource:
        defines: dict[str, Value] = {**self._sizes(), "kernel_tuner": 1, **config}
        return CSource(self.kernel.kernel_name, self.kernel.source, defines)

    def call_values(self, workload: Workload, args: Arguments) -> tuple[Any, ...]:
        return args.values

    def entry_sizes(self, workload: Workload) -> tuple[int, ...]:
        return ()

    def default_config(self, workload: Workload) -> Config:
        return {p.name: p.values[0] for p in self.kernel.parameters}

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        return self.kernel.arguments(workload, rng)

    def reference(self, workload: Workload, args: Arguments) -> list[Any]:
        return self.kernel.reference(workload, args)

    def tolerance(self, workload: Workload) -> Tolerance:
        return self.kernel.tolerance(workload)

    def verify(self, workload: Workload, args: Arguments) -> str | None:
        if self.verify_fn is None:
            return None
        answer = self.kernel.answer or [None] * len(args.values)
        if self.verify_fn(answer, list(args.values), self.kernel.atol):
            return None
        return "verify() returned False"

    def flops(self, workload: Workload) -> float:
        return self.kernel.flops(workload)

    def bytes_moved(self, workload: Workload) -> float:
        return self.kernel.bytes_moved(workload)

    def __getstate__(self) -> dict[str, Any]:
        """The measuring process gets the operator pickled: the space, and so the predicates'
        verdicts, are built already (functions need not pickle); ``verify`` must."""
        return {**self.__dict__, "predicates": ()}

    def _sizes(self) -> dict[str, Value]:
        return dict(zip(_AXES, self.kernel.problem_size))

    def __repr__(self) -> str:
        return f"<C kernel {self.kernel.kernel_name} of {self.name}>"
