"""A CPU operator whose one knob plants a behaviour in its C kernel: a kernel that is fast,
slow, wrong, crashes, hangs, returns an error, or does not compile. Importable by the CPU
backend's spawned worker (it is pickled into the worker's spec)."""

from __future__ import annotations

import numpy as np

from ktune.search_space.operators.base import Arguments
from ktune.search_space.operators.cpu import CpuLimits, CpuOperator, CSource
from ktune.search_space.operators.entry import EntryAbi, Pointer
from ktune.search_space.parameters import Config, Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

BEHAVIOURS = ("copy", "slow_copy", "wrong", "segfault", "hang", "fails", "syntax")

_BODIES = {
    "copy": "for (int i = 0; i < LEN; i++) y[i] = x[i]; return 0;",
    "slow_copy": (
        "for (int r = 0; r < 200; r++) for (int i = 0; i < LEN; i++) y[i] = x[i] + (REAL)(r - r); "
        "return 0;"
    ),
    "wrong": "for (int i = 0; i < LEN; i++) y[i] = x[i] + 1; return 0;",
    "segfault": "volatile int *p = 0; *p = 1; return 0;",
    "hang": "for (volatile int i = 0; ; i++) {} return 0;",
    "fails": "return 3;",
    "syntax": "this is not C",
}


class Planted(CpuOperator):
    name = "planted_copy"
    dims = ("LEN",)
    entry = EntryAbi(("LEN",), (Pointer("x"), Pointer("y", output=True)))

    def space(self, workload: Workload, limits: CpuLimits) -> SearchSpace:
        return SearchSpace([Parameter.of("behaviour", list(BEHAVIOURS))], [], name=workload.key)

    def render(self, config: Config, workload: Workload, *, specialise: bool = False) -> CSource:
        body = (
            "#include <stdint.h>\nint planted(int64_t len, const REAL *x, REAL *y) { (void)len; "
            + _BODIES[str(config["behaviour"])]
            + " }\n"
        )
        return CSource("planted", body, {"LEN": workload.shape[0], "REAL": "float"})

    def entry_sizes(self, workload: Workload) -> tuple[int, ...]:
        return (workload.shape[0],)

    def default_config(self, workload: Workload) -> Config:
        return {"behaviour": "copy"}

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        x = rng.uniform(-1, 1, workload.shape[0]).astype(np.float32)
        return Arguments((x, np.zeros_like(x)), outputs=(1,))

    def reference(self, workload: Workload, args: Arguments) -> list[np.ndarray]:
        return [np.asarray(args.values[0], dtype=np.float64)]

    def flops(self, workload: Workload) -> float:
        return 0.0

    def bytes_moved(self, workload: Workload) -> float:
        return 8.0 * workload.shape[0]
