"""Tuned shapes by family, kept in memory for the lookup's nearest-shape tier.

A family is (operator, dtype, layout, device). Its tuned shapes change only when a best
config is recorded for a new (workload, device) pair, i.e. when ``best_config`` gains a row
(rows are upserted, never deleted). So the index keeps each family's keys and ``log2`` shapes
while the row count of ``best_config`` stays the same, and checks that count (one cheap
query) on every use: a lookup never answers from a stale set of shapes, even when another
process tunes.

Distances are summed as :func:`ktune.db.lookup.shape_distance` sums them, term by term in the same
order, with ``math.log2``, so they equal its values exactly. In plain Python (a build-time
lookup imports no numpy; a shape's sum stops as soon as it is no nearer than the best so far),
or, in a process that has loaded numpy already (a server), with numpy over a family at once:
the same sums in the same order, the same answer, ten times faster on a thousand shapes.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

from ktune.db.lookup import RunSql, best_count, family_shapes
from ktune.db.lookup_records import LookupQuery

__all__ = ["ShapeIndex"]

_Family = tuple[str, str, str, str]


class _Shapes:
    """The tuned shapes of one family and rank: keys sorted, so the first of equal distances
    has the smallest key; ``log2`` of their sizes, and as a numpy array once one is asked."""

    __slots__ = ("_array", "keys", "log2")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.log2: list[tuple[float, ...]] = []
        self._array: Any = None

    def array(self, np: Any) -> Any:
        if self._array is None:
            self._array = np.array(self.log2, dtype=np.float64)
        return self._array

    def distances(self, np: Any, asked: list[float]) -> Any:
        """Every shape's distance to ``asked`` (log2 sizes), summed left to right as
        ``shape_distance`` sums, so that both give the same floats."""
        diff = np.abs(np.array(asked) - self.array(np))
        distances = diff[:, 0].copy()
        for k in range(1, diff.shape[1]):
            distances += diff[:, k]
        return distances


def _numpy() -> Any:
    """numpy, if this process has loaded it (never loaded here)."""
    return sys.modules.get("numpy")


class ShapeIndex:
    """Per-family tuned shapes of one log; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: int | None = None
        self._families: dict[_Family, dict[int, _Shapes]] = {}

    def nearest(self, run: RunSql, query: LookupQuery) -> tuple[str, float] | None:
        """Key and distance of the tuned shape nearest to the query's, in its family."""
        found = self._tuned(run, query)
        if found is None:
            return None
        shapes, asked = found
        np = _numpy()
        if np is not None:
            distances = shapes.distances(np, asked)
            best = int(np.argmin(distances))
            return shapes.keys[best], float(distances[best])
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

    def ranked(
        self, run: RunSql, query: LookupQuery, max_distance: float | None = None
    ) -> list[tuple[str, float]]:
        """Key and distance of every tuned shape of the query's family within
        ``max_distance`` (all when None), nearest first, the smaller key first among equals."""
        tuned_shapes = self._tuned(run, query)
        if tuned_shapes is None:
            return []
        shapes, asked = tuned_shapes
        limit = math.inf if max_distance is None else max_distance
        np = _numpy()
        if np is not None:
            distances = shapes.distances(np, asked)
            order = np.argsort(distances, kind="stable")  # keys are sorted: ties by key
            return [(shapes.keys[i], float(distances[i])) for i in order if distances[i] <= limit]
        found: list[tuple[float, int]] = []
        for i, tuned in enumerate(shapes.log2):
            distance = 0.0
            for a, t in zip(asked, tuned):  # left to right, as shape_distance's sum
                distance += abs(a - t)
            if distance <= limit:
                found.append((distance, i))
        found.sort()
        return [(shapes.keys[i], d) for d, i in found]

    def _tuned(self, run: RunSql, query: LookupQuery) -> tuple[_Shapes, list[float]] | None:
        """The tuned shapes of the query's family and rank, and the query's log2 sizes."""
        by_rank = self._family(run, (query.operator, query.dtype, query.layout, query.device))
        shapes = by_rank.get(len(query.shape))
        if shapes is None:
            return None
        return shapes, [math.log2(d) for d in query.shape]

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
            rank = grouped.setdefault(len(shape), _Shapes())
            rank.keys.append(key)
            rank.log2.append(tuple(math.log2(d) for d in shape))
        with self._lock:
            if self._version == version:
                self._families[family] = grouped
        return grouped
