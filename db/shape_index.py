"""Tuned shapes by family, kept in memory for the lookup's nearest-shape tier.

A family is (operator, dtype, layout, device). Its tuned shapes change only when a best
config is recorded for a new (workload, device) pair, i.e. when ``best_config`` gains a row
(rows are upserted, never deleted). So the index keeps each family's keys and ``log2`` shapes
while the row count of ``best_config`` stays the same, and checks that count (one cheap
query) on every use: a lookup never answers from a stale set of shapes, even when another
process tunes.

Distances are computed as :func:`db.lookup.shape_distance` does, term by term in the same
order, with ``math.log2`` (the C library's), so they equal its values exactly.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, bindparam, func, select

from ktune.db.queries import best_t, device_t, family_query, workload_t
from ktune.db.records import LookupQuery

__all__ = ["ShapeIndex"]

_Family = tuple[str, str, str, str]
_VERSION = select(func.count()).select_from(best_t)
_SHAPES = (
    family_query(workload_t.c.key, workload_t.c.shape)
    .where(device_t.c.name == bindparam("device"))
    .order_by(workload_t.c.key)
)


@dataclass(frozen=True)
class _Shapes:
    keys: list[str]  # sorted, so the first of equal distances has the smallest key
    log2: np.ndarray  # (len(keys), rank) float64


class ShapeIndex:
    """Per-family tuned shapes of one log; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: int | None = None
        self._families: dict[_Family, dict[int, _Shapes]] = {}

    def nearest(self, conn: Connection, query: LookupQuery) -> tuple[str, float] | None:
        """Key and distance of the tuned shape nearest to the query's, in its family."""
        by_rank = self._family(conn, (query.operator, query.dtype, query.layout, query.device))
        shapes = by_rank.get(len(query.shape))
        if shapes is None:
            return None
        asked = np.array([math.log2(d) for d in query.shape])
        diff = np.abs(asked - shapes.log2)
        distance = diff[:, 0].copy()
        for k in range(1, diff.shape[1]):  # left to right, as shape_distance's sum
            distance += diff[:, k]
        best = int(np.argmin(distance))
        return shapes.keys[best], float(distance[best])

    def _family(self, conn: Connection, family: _Family) -> dict[int, _Shapes]:
        version = int(conn.execute(_VERSION).scalar_one())
        with self._lock:
            if version != self._version:
                self._families.clear()
                self._version = version
            cached = self._families.get(family)
        if cached is not None:
            return cached
        operator, dtype, layout, device = family
        params = {"operator": operator, "dtype": dtype, "layout": layout, "device": device}
        rows = conn.execute(_SHAPES, params).all()
        grouped: dict[int, list[tuple[str, list[float]]]] = {}
        for key, shape in rows:
            grouped.setdefault(len(shape), []).append((key, [math.log2(d) for d in shape]))
        built = {
            rank: _Shapes([k for k, _ in items], np.array([s for _, s in items], dtype=np.float64))
            for rank, items in grouped.items()
        }
        with self._lock:
            if self._version == version:
                self._families[family] = built
        return built
