"""Build-time lookup in the log: the best config of a workload on a device, in tiers.

1. ``exact``: the best config of this very workload on this device.
2. ``nearest_shape``: the best config of the same operator, dtype and layout on this device
   whose shape (same rank) is nearest, by :func:`shape_distance`.
3. ``similar_device``: the best config of this very workload on the most similar other
   device, as ranked by a caller-given device distance (the log knows no device model).
4. ``similar_device_nearest_shape``: on the most similar other device that has tuned shapes
   of the same operator, dtype, layout and rank, the nearest of them (a new GPU and a new
   shape; ``ktune.lookup`` asks its cost model before taking this one).

Ties are broken by workload key, then device name, so an answer never depends on row order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from sqlalchemy import Connection, bindparam

from ktune.db.queries import device_t, family_query, to_tuned, tuned_query, workload_t
from ktune.db.records import BestRecord, LookupQuery, LookupResult
from ktune.db.shape_index import ShapeIndex

__all__ = [
    "DeviceDistance",
    "exact",
    "family_devices",
    "lookup",
    "operator_ranks",
    "rank_devices",
    "shape_distance",
    "tuned",
]

#: distance between two devices by name; None when it cannot be told (unknown device)
DeviceDistance = Callable[[str, str], float | None]


def shape_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Sum over dimensions of ``|log2(a_i / b_i)|``: doubling one dimension costs 1.

    Shapes must have the same rank. A C header's dispatch function computes the same, so a
    build and the log agree on which tuned shape is nearest.
    """
    if len(a) != len(b):
        raise ValueError(f"shapes {list(a)} and {list(b)} have different ranks")
    return sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b))


# Built once: the exact tier is the hot path of every build-time lookup.
_EXACT = tuned_query().where(
    workload_t.c.key == bindparam("workload_key"), device_t.c.name == bindparam("device")
)


def exact(conn: Connection, workload_key: str, device: str) -> BestRecord | None:
    row = conn.execute(_EXACT, {"workload_key": workload_key, "device": device}).first()
    return None if row is None else to_tuned(row)


def tuned(
    conn: Connection,
    *,
    operator: str | None = None,
    dtype: str | None = None,
    layout: str | None = None,
    device: str | None = None,
    workload_key: str | None = None,
) -> list[BestRecord]:
    """Best configs matching every given field, by workload key and device name."""
    query = tuned_query().order_by(workload_t.c.key, device_t.c.name)
    for column, value in (
        (workload_t.c.operator, operator),
        (workload_t.c.dtype, dtype),
        (workload_t.c.layout, layout),
        (device_t.c.name, device),
        (workload_t.c.key, workload_key),
    ):
        if value is not None:
            query = query.where(column == value)
    return [to_tuned(row) for row in conn.execute(query)]


def operator_ranks(conn: Connection, operator: str) -> set[int]:
    """The ranks of the shapes of ``operator``'s workloads in the log."""
    shapes = conn.execute(
        workload_t.select()
        .with_only_columns(workload_t.c.shape)
        .where(workload_t.c.operator == operator)
    ).scalars()
    return {len(shape) for shape in shapes}


def lookup(
    conn: Connection,
    query: LookupQuery,
    *,
    shapes: ShapeIndex,
    fallback: bool = True,
    device_distance: DeviceDistance | None = None,
) -> LookupResult | None:
    """The first tier that answers, or None. Without ``fallback`` only ``exact`` is tried;
    without ``device_distance`` the two similar-device tiers are skipped. ``shapes`` holds the
    tuned shapes of the nearest-shape tier between calls."""
    hit = exact(conn, query.workload_key, query.device)
    if hit is not None:
        return LookupResult("exact", hit, 0.0)
    if not fallback:
        return None
    found = shapes.nearest(conn, query)
    if found is not None:
        key, distance = found
        hit = exact(conn, key, query.device)
        if hit is not None:  # None only if the config went away in between
            return LookupResult("nearest_shape", hit, distance)
    if device_distance is None:
        return None
    by_device = {other.device_name: other for other in tuned(conn, workload_key=query.workload_key)}
    ranked = rank_devices(query.device, by_device, device_distance)
    if ranked:
        apart, name = ranked[0]
        return LookupResult("similar_device", by_device[name], apart)
    return _similar_device_nearest_shape(conn, query, shapes, device_distance)


_FAMILY_DEVICES = family_query(device_t.c.name).distinct()


def rank_devices(
    device: str, others: Iterable[str], device_distance: DeviceDistance
) -> list[tuple[float, str]]:
    """``(distance, name)`` of the ``others`` but ``device``, nearest first (ties by name);
    a device whose distance cannot be told is left out."""
    ranked = []
    for name in set(others) - {device}:
        apart = device_distance(device, name)
        if apart is not None and math.isfinite(apart):
            ranked.append((apart, name))
    return sorted(ranked)


def family_devices(conn: Connection, operator: str, dtype: str, layout: str) -> list[str]:
    """The devices with tuned shapes of (``operator``, ``dtype``, ``layout``)."""
    params = {"operator": operator, "dtype": dtype, "layout": layout}
    return list(conn.execute(_FAMILY_DEVICES, params).scalars())


def _similar_device_nearest_shape(
    conn: Connection, query: LookupQuery, shapes: ShapeIndex, device_distance: DeviceDistance
) -> LookupResult | None:
    """The nearest tuned shape on the most similar other device that has shapes of the
    query's family and rank; its distance is the device distance, as in ``similar_device``."""
    names = family_devices(conn, query.operator, query.dtype, query.layout)
    for apart, name in rank_devices(query.device, names, device_distance):
        found = shapes.nearest(conn, replace(query, device=name))
        if found is None:  # tuned shapes of another rank only
            continue
        hit = exact(conn, found[0], name)
        if hit is not None:
            return LookupResult("similar_device_nearest_shape", hit, apart)
    return None
