"""The memory limit of a workload at submission: refuse what no runner could hold.

Each dimension of a shape is bounded (``MAX_DIM``), their product is not: ``cpu_matmul``
20000x20000x20000 needs about 14 GB for its arguments and float64 reference, and
10^12 x 10^12 x 10^12 more than any machine has. :func:`check_footprint` compares the
operator's own estimate (:meth:`~ktune.search_space.operators.base.ShapedOperator.footprint`)
with a limit before anything is allocated, so that ``ktune tune`` says so in one line and
``POST /v1/jobs`` with a 422, instead of a runner failing the job later.
"""

from __future__ import annotations

import os

from ktune.search_space.operators.base import ShapedOperator
from ktune.search_space.workload import Workload
from ktune.tuner.sources.base import SourceError

__all__ = [
    "DEFAULT_MAX_WORKLOAD_BYTES",
    "LIMIT_VARIABLE",
    "check_footprint",
    "workload_memory_limit",
]

#: the largest footprint of a workload accepted, unless ``KTUNE_MAX_WORKLOAD_BYTES`` says
DEFAULT_MAX_WORKLOAD_BYTES = 8 * 1024**3
LIMIT_VARIABLE = "KTUNE_MAX_WORKLOAD_BYTES"


def workload_memory_limit() -> int:
    """``KTUNE_MAX_WORKLOAD_BYTES`` when set to a positive integer, else
    :data:`DEFAULT_MAX_WORKLOAD_BYTES`."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return DEFAULT_MAX_WORKLOAD_BYTES


def _size(n: int) -> str:
    if n >= 1e15:
        return f"{n:.2e} bytes"
    return f"{n / 1024**3:.3g} GiB" if n >= 1024**3 else f"{n / 1024**2:.3g} MiB"


def check_footprint(op: ShapedOperator, workload: Workload, limit: int | None = None) -> None:
    """A :class:`SourceError` naming the limit when a measurement of ``workload`` would hold
    more than ``limit`` bytes (default :func:`workload_memory_limit`)."""
    limit = workload_memory_limit() if limit is None else limit
    need = op.footprint(workload)
    if need > limit:
        raise SourceError(
            f"{workload.key} is too large: its arguments and float64 reference need about "
            f"{_size(need)} of memory, more than the limit of {_size(limit)} "
            f"({LIMIT_VARIABLE})"
        )
