"""Chunked enumeration of the valid configs of a constrained cartesian space.

A config is identified by its *cartesian rank*: the mixed-radix number of its value positions,
first parameter most significant (the order of ``itertools.product``). Enumeration binds one
parameter at a time, keeping the array of valid partial ranks, and applies each constraint as
soon as all its names are bound. Parameters are bound in an order chosen so that constraints
prune early; ranks are always in the declared radix, so only a final sort is needed.
Intermediates larger than ``chunk_rows`` are split and processed depth first, so memory stays
bounded by a few chunks plus the output.

Two limits keep a huge space (a T1 spec of 10^12 configs) from exhausting memory or time: at
most ``max_configs`` valid configs (:data:`MAX_CONFIGS`), and at most ``max_rows`` candidate
rows examined (:data:`MAX_ROWS`). Past either, :class:`TooLarge` is raised; where the
parameters still to bind are unconstrained, the count is known before their rows are made, so
an unconstrained space of 10^12 configs is refused before anything is allocated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ktune.search_space.constraints import Constraint

__all__ = [
    "CHUNK_ROWS",
    "MAX_CONFIGS",
    "MAX_ROWS",
    "TooLarge",
    "binding_order",
    "enumerate_ranks",
    "strides_of",
]

CHUNK_ROWS = 1 << 20
#: the most valid configs a space may have: 2^25 ranks are 256 MiB
MAX_CONFIGS = 1 << 25
#: the most candidate rows enumeration examines (about ten seconds of work)
MAX_ROWS = 1 << 28


class TooLarge(ValueError):
    """A space has more valid configs, or needs more work to enumerate, than the limits allow."""


def strides_of(radices: Sequence[int]) -> np.ndarray:
    """Mixed-radix place values, last radix least significant."""
    strides = np.ones(len(radices), dtype=np.int64)
    for i in range(len(radices) - 2, -1, -1):
        strides[i] = strides[i + 1] * radices[i + 1]
    return strides


def binding_order(
    names: Sequence[str], radices: Sequence[int], constraints: Sequence[Constraint]
) -> list[int]:
    """Parameter indices in the order to bind them: greedily, the one that completes the most
    constraints (then shares most constraints with bound ones, then has fewest values); params
    no constraint reads go last, in declared order."""
    index = {n: i for i, n in enumerate(names)}
    pending = [{index[n] for n in c.names} for c in constraints if c.names]
    constrained = set().union(*pending) if pending else set()
    bound: set[int] = set()
    order: list[int] = []
    while constrained - bound:
        best = min(constrained - bound, key=lambda i: _score(i, pending, bound, radices[i]))
        order.append(best)
        bound.add(best)
        pending = [s for s in pending if not s <= bound]
    return order + [i for i in range(len(names)) if i not in bound]


def _score(
    i: int, pending: list[set[int]], bound: set[int], radix: int
) -> tuple[int, int, int, int]:
    completes = sum(1 for s in pending if i in s and s <= bound | {i})
    touches = sum(1 for s in pending if i in s and s & bound)
    return (-completes, -touches, radix, i)


def enumerate_ranks(
    names: Sequence[str],
    columns: Sequence[np.ndarray],
    constraints: Sequence[Constraint],
    *,
    chunk_rows: int = CHUNK_ROWS,
    max_configs: int = MAX_CONFIGS,
    max_rows: int = MAX_ROWS,
) -> np.ndarray:
    """Sorted int64 cartesian ranks (declared order) of the configs that satisfy all constraints.

    ``columns[i]`` holds the values of parameter ``names[i]`` in their declared order.
    :class:`TooLarge` past ``max_configs`` valid configs or ``max_rows`` rows examined.
    """
    return _Enumerator(names, columns, constraints, chunk_rows, max_configs, max_rows).run()


class _Enumerator:
    """Depth-first expansion in binding order. Partial ranks are kept in the *declared* mixed
    radix with unbound parameters at position 0, so decoding a bound parameter is one divmod
    and the leaves need no conversion (only a final sort when the order was changed)."""

    def __init__(
        self,
        names: Sequence[str],
        columns: Sequence[np.ndarray],
        constraints: Sequence[Constraint],
        chunk_rows: int,
        max_configs: int = MAX_CONFIGS,
        max_rows: int = MAX_ROWS,
    ) -> None:
        self.names = list(names)
        self.columns = list(columns)
        self.radices = [len(c) for c in columns]
        self.strides = [int(s) for s in strides_of(self.radices)]
        self.constants = [c for c in constraints if not c.names]
        self.order = binding_order(names, self.radices, constraints)
        self.chunk_rows = max(1, chunk_rows)
        index = {n: i for i, n in enumerate(names)}
        # checks[d]: constraints whose last name is bound at depth d, with their params.
        self.checks: list[list[tuple[Constraint, list[int]]]] = [[] for _ in self.order]
        for c in constraints:
            if c.names:
                params = [index[n] for n in sorted(c.names)]
                depth = max(self.order.index(p) for p in params)
                self.checks[depth].append((c, params))
        self.out: list[np.ndarray] = []
        self.max_configs, self.max_rows = max_configs, max_rows
        self.configs = self.rows = 0
        # From depth first_free on no constraint is checked: each row there becomes free[d]
        # configs, known before they are made.
        self.free = [1] * (len(self.order) + 1)
        self.first_free = len(self.order)
        while self.first_free > 0 and not self.checks[self.first_free - 1]:
            self.first_free -= 1
            p = self.order[self.first_free]
            self.free[self.first_free] = self.free[self.first_free + 1] * self.radices[p]

    def run(self) -> np.ndarray:
        if any(not c.evaluate({}, 1)[0] for c in self.constants):
            return np.empty(0, dtype=np.int64)
        self._expand(np.zeros(1, dtype=np.int64), 0)
        ranks = np.concatenate(self.out) if self.out else np.empty(0, dtype=np.int64)
        if self.order != sorted(self.order):
            ranks.sort()
        return ranks

    def _expand(self, partial: np.ndarray, depth: int) -> None:
        if depth == self.first_free:  # each row becomes a known number of configs
            self.configs += len(partial) * self.free[depth]
            if self.configs > self.max_configs:
                raise TooLarge(
                    f"the space has more than {self.max_configs:,} valid configs "
                    f"(of {math.prod(self.radices):.3g}): too many to enumerate"
                )
        if depth == len(self.order):
            self.out.append(partial)
            return
        p = self.order[depth]
        radix = self.radices[p]
        step = max(1, self.chunk_rows // radix)
        offsets = np.arange(radix, dtype=np.int64) * self.strides[p]
        for start in range(0, len(partial), step):
            if depth < self.first_free:
                self.rows += min(step, len(partial) - start) * radix
                if self.rows > self.max_rows:
                    raise TooLarge(
                        f"enumerating the space's valid configs examines more than "
                        f"{self.max_rows:,} of its {math.prod(self.radices):.3g}: constrain "
                        "the parameters with many values more tightly"
                    )
            rows = (partial[start : start + step, None] + offsets).ravel()
            rows = self._filter(rows, depth)
            if rows.size:
                self._expand(rows, depth + 1)

    def _filter(self, rows: np.ndarray, depth: int) -> np.ndarray:
        checks = self.checks[depth]
        decoded: dict[int, np.ndarray] = {}
        for k, (constraint, params) in enumerate(checks):
            for p in params:
                if p not in decoded:
                    decoded[p] = self.columns[p][(rows // self.strides[p]) % self.radices[p]]
            keep = constraint.evaluate({self.names[p]: decoded[p] for p in params}, len(rows))
            if not keep.all():
                rows = rows[keep]
                if not rows.size:
                    break
                later = {q for _, qs in checks[k + 1 :] for q in qs}
                decoded = {q: v[keep] for q, v in decoded.items() if q in later}
        return rows
