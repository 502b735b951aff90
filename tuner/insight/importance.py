"""Which knobs matter: a first-order functional ANOVA over a job's measured trials.

Method: the target is ``log(time_ms)`` of the ``ok`` trials. For each knob, the trials are
grouped by the knob's value; the knob's main effect is the mean of the target per value, and
its importance is the share of the target's variance those means explain (the correlation
ratio), corrected for the number of values as epsilon squared::

    importance = max(0, (SS_between - (k - 1) * MS_within) / SS_total)

with ``k`` the knob's distinct values among the ok trials. This is the first-order term of a
functional ANOVA under the distribution of the configs the job measured (not a uniform one
over the space): a strategy that sampled a region densely weighs it more. Interactions are not
attributed to any knob, so importances need not sum to 1. Failed trials are counted per value,
not timed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["METHOD", "KnobImportance", "ValueEffect", "knob_importance"]

METHOD = (
    "first-order functional ANOVA over the measured trials: the share of the variance of "
    "log(time) of the ok trials that each knob's value explains alone (epsilon squared), "
    "under the distribution of the configs measured; interactions are not attributed"
)


@dataclass(frozen=True)
class ValueEffect:
    """One value of a knob: trials with it, how many were ok, their geometric mean and best
    time (None without an ok trial)."""

    value: Any
    n: int
    n_ok: int
    geomean_ms: float | None
    best_ms: float | None


@dataclass(frozen=True)
class KnobImportance:
    """A knob's importance (None when fewer than 3 ok trials or no spread in time) and its
    values in ascending order."""

    name: str
    importance: float | None
    values: list[ValueEffect]


def _order(value: Any) -> tuple[int, float, str]:
    """Numbers ascending first, then everything else by its text."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return (1, 0.0, str(value))
    return (0, float(value), "")


def _key(value: Any) -> Any:
    """A hashable stand-in for a config value (lists in a config become tuples)."""
    return tuple(value) if isinstance(value, list) else value


def knob_importance(
    trials: Iterable[tuple[dict[str, Any], str, float | None]],
    knobs: Sequence[str] | None = None,
) -> list[KnobImportance]:
    """Importance of each knob from ``(config, status, time_ms)`` triples, most important
    first (ties and unknowns by name). ``knobs``: which config keys (default: every key of
    any config)."""
    rows = list(trials)
    names = list(knobs) if knobs is not None else sorted({k for c, _, _ in rows for k in c})
    ok = [
        (c, math.log(t))
        for c, status, t in rows
        if status == "ok" and t is not None and t > 0 and math.isfinite(t)
    ]
    mean = sum(y for _, y in ok) / len(ok) if ok else 0.0
    ss_total = sum((y - mean) ** 2 for _, y in ok)
    out = []
    for name in names:
        counts: dict[Any, int] = {}
        shown: dict[Any, Any] = {}
        for config, _, _ in rows:
            value = config.get(name)
            counts[_key(value)] = counts.get(_key(value), 0) + 1
            shown.setdefault(_key(value), value)
        groups: dict[Any, list[float]] = {}
        for config, y in ok:
            groups.setdefault(_key(config.get(name)), []).append(y)
        values = [
            ValueEffect(
                value=shown[v],
                n=counts[v],
                n_ok=len(groups.get(v, [])),
                geomean_ms=math.exp(sum(groups[v]) / len(groups[v])) if v in groups else None,
                best_ms=math.exp(min(groups[v])) if v in groups else None,
            )
            for v in sorted(counts, key=lambda v: _order(shown[v]))
        ]
        out.append(KnobImportance(name, _epsilon_squared(groups, mean, ss_total, len(ok)), values))
    return sorted(out, key=lambda k: (k.importance is None, -(k.importance or 0.0), k.name))


def _epsilon_squared(
    groups: dict[Any, list[float]], mean: float, ss_total: float, n: int
) -> float | None:
    k = len(groups)
    if n < 3 or ss_total <= 1e-12 * max(1, n):
        return None
    if k < 2:
        return 0.0
    ss_between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values())
    ms_within = (ss_total - ss_between) / (n - k) if n > k else 0.0
    return max(0.0, min(1.0, (ss_between - (k - 1) * ms_within) / ss_total))
