"""Tuned shapes by family, kept in memory for the lookup's nearest-shape tier.

A family is (operator, dtype, layout, device). Its tuned shapes change only when a best
config is recorded for a new (workload, device) pair, i.e. when ``best_config`` gains a row
(rows are upserted, never deleted). So the index keeps each family's keys and ``log2`` shapes
while the row count of ``best_config`` stays the same, and checks that count (one cheap
query) on every use: a lookup never answers from a stale set of shapes, even when another
process tunes.

Distances are summed as :func:`db.lookup.shape_distance` sums them, term by term in the same
order, with ``math.log2``, so they equal its values exactly. Plain Python: a build-time lookup
imports no numpy, and a scan of a family's shapes stops adding as soon as a shape is no
nearer than the best so far.
"""

from __future__ import annotations

import math
import threading
from typing import NamedTuple

from ktune.db.lookup import RunSql, best_count, family_shapes
from ktune.db.lookup_records import LookupQuery

__all__ = ["ShapeIndex"]

_Family = tuple[str, str, str, str]


class _Shapes(NamedTuple):
    keys: list[str]  # sorted, so the first of equal distances has the smallest key
    log2: list[tuple[float, ...]]


class ShapeIndex:
    """Per-family tuned shapes of one log; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: int | None = None
        self._families: dict[_Family, dict[int, _Shapes]] = {}

    def nearest(self, run: RunSql, query: LookupQuery) -> tuple[str, float] | None:
        """Key and distance of the tuned shape nearest to the query's, in its family."""
        by_rank = self._family(run, (query.operator, query.dtype, query.layout, query.device))
        shapes = by_rank.get(len(query.shape))
        if shapes is None:
            return None
        asked = [math.log2(d) for d in query.shape]
        best, best_distance = 0, math.inf
        for i, tuned in enumerate(shapes.log2):
            distance = 0.0
            for a, t in zip(asked, tuned):  # left to right, as shape_distance's sum
                distance += abs(a - t)
                if distance >= best_distance:
                    break
            else:
                best, best_distance = i, distance
        return shapes.keys[best], best_distance

    def _family(self, run: RunSql, family: _Family) -> dict[int, _Shapes]:
        version = best_count(run)
        with self._lock:
            if version != self._version:
                self._families.clear()
                self._version = version
            cached = self._families.get(family)
        if cached is not None:
            return cached
        grouped: dict[int, _Shapes] = {}
        for key, shape in family_shapes(run, *family):
            rank = grouped.setdefault(len(shape), _Shapes([], []))
            rank.keys.append(key)
            rank.log2.append(tuple(math.log2(d) for d in shape))
        with self._lock:
            if self._version == version:
                self._families[family] = grouped
        return grouped
