"""Whether a tuned config may answer a question: valid at the asked shape, and fresh.

**Validity.** A config measured for this very workload is valid (``measured``). A config tuned
for another shape of ktune's own operators is checked against the operator's ``requirements``
(constraint-language expressions over its knobs and the entry's sizes, e.g. fp16 matmul's
``K % vector_width == 0 and N % vector_width == 0``) at the asked shape (``checked``); CPU
operators have none (every config computes every shape). For any other operator (a recorded
space, a custom kernel) the log holds no rule that depends on the shape: the answer says
``unchecked``.

**Freshness.** A best config is stale when it was measured with another kernel template of its
operator than the installed one (``ktune.search_space.operators.fingerprint``), or under another
toolchain (driver, CUDA, C compiler and flags) than the device's latest fingerprinted trials
(``ktune.db.fingerprints``). A config of unknown provenance (an import) is not called stale.
"""

from __future__ import annotations

import math
import os

from ktune.db.fingerprints import kernel_of, toolchain_changes
from ktune.db.lookup import Admit
from ktune.db.lookup_records import BestRecord, LookupQuery
from ktune.search_space.operators.fingerprint import kernel_hash

__all__ = [
    "DEFAULT_MAX_DISTANCE",
    "MAX_DISTANCE_ENV",
    "admit",
    "default_max_distance",
    "invalid_reason",
    "stale_reason",
    "validity",
]

#: the farthest tuned shape (sum over dimensions of |log2(asked / tuned)|) that may answer:
#: one dimension 16x off, or three about 2.5x off
DEFAULT_MAX_DISTANCE = 4.0
#: the setting that changes it for every lookup of a process (a number; ``inf``: no limit)
MAX_DISTANCE_ENV = "KTUNE_MAX_DISTANCE"


def default_max_distance() -> float:
    """``$KTUNE_MAX_DISTANCE`` when set (a :class:`ValueError` naming it when it is not a
    number >= 0), else :data:`DEFAULT_MAX_DISTANCE`."""
    text = os.environ.get(MAX_DISTANCE_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_DISTANCE
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise ValueError(f"${MAX_DISTANCE_ENV} must be a number >= 0, got {text[:40]!r}")
    return value


def validity(record: BestRecord, query: LookupQuery) -> str:
    """``measured``, ``checked`` or ``unchecked`` (see the module's docstring)."""
    return _judge(record, query)[0]


def invalid_reason(record: BestRecord, query: LookupQuery) -> str | None:
    """Why ``record``'s config is not valid at the query's shape, or None when it is (or
    cannot be told)."""
    return _judge(record, query)[1]


def _judge(record: BestRecord, query: LookupQuery) -> tuple[str, str | None]:
    """(validity, why the config is invalid at the asked shape or None)."""
    if record.workload_key == query.workload_key:
        return "measured", None
    if kernel_hash(query.operator) is None:
        return "unchecked", None
    from ktune.search_space.operators.forms import OperatorError, form

    own = form(query.operator)  # its form: the requirements and sizes, without numpy
    if own is None or not own.requirements:
        return "checked", None
    requirements = own.requirements
    from ktune.search_space.operators.expressions import int_expr
    from ktune.search_space.workload import Workload

    env = {**own.sizes(Workload.from_key(query.workload_key)), **record.config}
    try:
        broken = [r for r in requirements if not int_expr(r).value(env)]
    except (OperatorError, ValueError, TypeError, ZeroDivisionError):
        # not the operator's knobs (another interface of the kernel): no rule to apply
        return "unchecked", None
    if not broken:
        return "checked", None
    return "checked", f"its config breaks {' and '.join(broken)} at {list(query.shape)}"


def stale_reason(record: BestRecord) -> str | None:
    """Why ``record`` is stale, or None when it is fresh (or of unknown provenance)."""
    reasons = []
    measured, current = kernel_of(record.toolchain), kernel_hash(record.operator)
    if measured and current is not None and measured != current:
        reasons.append(f"measured with another kernel template of {record.operator}")
    changes = toolchain_changes(record.toolchain, record.device_toolchain)
    if changes:
        reasons.append(f"measured under an older toolchain ({', '.join(changes)})")
    return "; ".join(reasons) or None


def admit(*, allow_stale: bool) -> Admit:
    """The lookup's rule: valid at the asked shape, and fresh unless ``allow_stale``."""

    def rule(record: BestRecord, query: LookupQuery) -> str | None:
        if not allow_stale and (stale := stale_reason(record)) is not None:
            return f"stale: {stale}"
        return invalid_reason(record, query)

    return rule
