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

The queries are plain SQL text run through :data:`RunSql`, a callable over a DB-API
connection: :class:`db.TuningLog` runs them through its engine's driver connection, the
read-only reader of ``ktune.db.reader`` through ``sqlite3`` or ``psycopg`` alone (a build-time
lookup then imports no SQLAlchemy). One text, one decoding of rows: both give the same
answers. Nothing here imports SQLAlchemy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from typing import Any, Protocol

from ktune.db.lookup_records import BestRecord, DeviceRecord, LookupQuery, LookupResult

__all__ = [
    "Admit",
    "DeviceDistance",
    "RunSql",
    "ShapeSource",
    "best_count",
    "exact",
    "family_devices",
    "family_shapes",
    "get_device",
    "list_devices",
    "lookup",
    "operator_ranks",
    "pyformat",
    "rank_devices",
    "shape_distance",
    "tuned",
]

#: distance between two devices by name; None when it cannot be told (unknown device)
DeviceDistance = Callable[[str, str], float | None]

#: runs one SELECT with ``:name`` parameters and returns its rows (``ktune.db.reader`` and
#: ``TuningLog`` give one over their connection; :func:`pyformat` turns the text into
#: psycopg's parameter style)
RunSql = Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]]


def shape_distance(a: Sequence[int], b: Sequence[int]) -> float:
    """Sum over dimensions of ``|log2(a_i / b_i)|``: doubling one dimension costs 1.

    Shapes must have the same rank. A C header's dispatch function computes the same, so a
    build and the log agree on which tuned shape is nearest.
    """
    if len(a) != len(b):
        raise ValueError(f"shapes {list(a)} and {list(b)} have different ranks")
    return sum(abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b))


@cache
def pyformat(sql: str) -> str:
    """``sql`` with its ``:name`` parameters written as psycopg's ``%(name)s``."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


# -- the queries -----------------------------------------------------------------------------

_JOINS = (
    " FROM best_config"
    " JOIN workload ON best_config.workload_id = workload.id"
    " JOIN device ON best_config.device_id = device.id"
)
#: best configs with their workload and device, the job and position (seq) of the trial that
#: measured them (NULL outside any job), and whether a job of that workload and device is
#: still queued or running (two comparisons, not IN: a plan that does not depend on a list)
_TUNED = (
    "SELECT workload.key, workload.operator, workload.shape, workload.dtype, workload.layout,"
    " device.name, best_config.trial_id, best_config.time_ms, best_config.config,"
    " best_config.updated_at, best_trial.job_id, best_trial.seq,"
    " EXISTS (SELECT job.id FROM job WHERE job.workload_id = best_config.workload_id"
    " AND job.device_id = best_config.device_id"
    " AND (job.state = 'queued' OR job.state = 'running')) AS tuning,"
    " best_config.fingerprint, best_trial.toolchain, device.toolchain,"
    " best_trial.confirmed_ms, best_trial.noise_band, best_trial.flag"
    + _JOINS
    + " LEFT OUTER JOIN trial AS best_trial ON best_config.trial_id = best_trial.id"
)
_EXACT = _TUNED + " WHERE workload.key = :workload_key AND device.name = :device"
#: the columns :func:`tuned` filters on, by argument
_FILTERS = {
    "operator": "workload.operator",
    "dtype": "workload.dtype",
    "layout": "workload.layout",
    "device": "device.name",
    "workload_key": "workload.key",
}
_FAMILY = (
    " WHERE workload.operator = :operator AND workload.dtype = :dtype AND workload.layout = :layout"
)
_FAMILY_DEVICES = "SELECT DISTINCT device.name" + _JOINS + _FAMILY
_FAMILY_SHAPES = (
    "SELECT workload.key, workload.shape"
    + _JOINS
    + _FAMILY
    + " AND device.name = :device ORDER BY workload.key"
)
_BEST_COUNT = "SELECT count(*) FROM best_config"
_OPERATOR_SHAPES = "SELECT workload.shape FROM workload WHERE workload.operator = :operator"
_DEVICES = (
    "SELECT device.id, device.name, device.vendor, device.architecture, device.spec FROM device"
)


_decode = json.JSONDecoder().decode


def _json(value: Any) -> Any:
    """A JSON column's value: SQLite gives its text, psycopg the parsed value."""
    return _decode(value) if isinstance(value, str) else value


def _moment(value: Any) -> datetime:
    """A timestamp column as an aware UTC time (SQLite stores naive UTC text)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _tuned(row: Sequence[Any]) -> BestRecord:
    key, operator, shape, dtype, layout, device, trial_id, time_ms, config = row[:9]
    updated_at, job_id, seq, tuning, mark, toolchain, device_toolchain = row[9:16]
    confirmed_ms, noise_band, flag = row[16:]
    return BestRecord(
        workload_key=key,
        device_name=device,
        trial_id=trial_id,
        time_ms=time_ms,
        config=_json(config),
        updated_at=_moment(updated_at),
        operator=operator,
        shape=tuple(_json(shape)),
        dtype=dtype,
        layout=layout,
        job_id=job_id,
        seq=seq,
        tuning=bool(tuning),
        fingerprint=mark or "",
        toolchain=_json(toolchain) or {},
        device_toolchain=_json(device_toolchain) or {},
        confirmed_ms=confirmed_ms,
        noise_band=noise_band,
        flag=flag or "",
    )


def _device(row: Sequence[Any]) -> DeviceRecord:
    id_, name, vendor, architecture, spec = row
    return DeviceRecord(id_, name, vendor, architecture, None if spec is None else _json(spec))


def exact(run: RunSql, workload_key: str, device: str) -> BestRecord | None:
    rows = run(_EXACT, {"workload_key": workload_key, "device": device})
    return _tuned(rows[0]) if rows else None


def tuned(
    run: RunSql,
    *,
    operator: str | None = None,
    dtype: str | None = None,
    layout: str | None = None,
    device: str | None = None,
    workload_key: str | None = None,
) -> list[BestRecord]:
    """Best configs matching every given field, by workload key and device name."""
    given = {
        "operator": operator,
        "dtype": dtype,
        "layout": layout,
        "device": device,
        "workload_key": workload_key,
    }
    params = {name: value for name, value in given.items() if value is not None}
    where = " AND ".join(f"{_FILTERS[name]} = :{name}" for name in params)
    sql = _TUNED + (f" WHERE {where}" if where else "") + " ORDER BY workload.key, device.name"
    return [_tuned(row) for row in run(sql, params)]


def operator_ranks(run: RunSql, operator: str) -> set[int]:
    """The ranks of the shapes of ``operator``'s workloads in the log."""
    return {len(_json(shape)) for (shape,) in run(_OPERATOR_SHAPES, {"operator": operator})}


def family_devices(run: RunSql, operator: str, dtype: str, layout: str) -> list[str]:
    """The devices with tuned shapes of (``operator``, ``dtype``, ``layout``)."""
    params = {"operator": operator, "dtype": dtype, "layout": layout}
    return [name for (name,) in run(_FAMILY_DEVICES, params)]


def family_shapes(
    run: RunSql, operator: str, dtype: str, layout: str, device: str
) -> list[tuple[str, tuple[int, ...]]]:
    """(workload key, shape) of the tuned shapes of one family on ``device``, by key."""
    params = {"operator": operator, "dtype": dtype, "layout": layout, "device": device}
    return [(key, tuple(_json(shape))) for key, shape in run(_FAMILY_SHAPES, params)]


def best_count(run: RunSql) -> int:
    """How many best configs the log holds (it only grows: see ``ktune.db.shape_index``)."""
    return int(run(_BEST_COUNT, {})[0][0])


def get_device(run: RunSql, name: str) -> DeviceRecord | None:
    rows = run(_DEVICES + " WHERE device.name = :name", {"name": name})
    return _device(rows[0]) if rows else None


def list_devices(run: RunSql) -> list[DeviceRecord]:
    return [_device(row) for row in run(_DEVICES + " ORDER BY device.name", {})]


# -- the tiers -------------------------------------------------------------------------------


class ShapeSource(Protocol):
    """What the nearest-shape tiers need of ``ktune.db.shape_index.ShapeIndex``."""

    def ranked(
        self, run: RunSql, query: LookupQuery, max_distance: float | None = None
    ) -> list[tuple[str, float]]: ...


#: why a tuned config cannot answer a query (None: it can), e.g. a config its operator's
#: requirements forbid at the asked shape, or one measured under an older toolchain
Admit = Callable[[BestRecord, LookupQuery], str | None]


def lookup(
    run: RunSql,
    query: LookupQuery,
    *,
    shapes: ShapeSource,
    fallback: bool = True,
    device_distance: DeviceDistance | None = None,
    admit: Admit | None = None,
    max_distance: float | None = None,
    rejected: list[str] | None = None,
) -> LookupResult | None:
    """The first tier that answers, or None. Without ``fallback`` only ``exact`` is tried;
    without ``device_distance`` the two similar-device tiers are skipped. ``shapes`` holds the
    tuned shapes of the nearest-shape tier between calls.

    ``admit`` (the caller's rule, since the log knows no operator) may refuse a tuned config;
    then the next one is tried: in the shape tiers the next nearest shape, in the device tiers
    the next most similar device. ``max_distance`` bounds the shape distance of the shape
    tiers (beyond it nothing is tuned near the asked shape). The reasons of every refusal are
    appended to ``rejected`` when given."""

    def admitted(hit: BestRecord | None) -> bool:
        if hit is None:
            return False
        reason = None if admit is None else admit(hit, query)
        if reason is not None and rejected is not None:
            rejected.append(f"{hit.workload_key} on {hit.device_name}: {reason}")
        return reason is None

    hit = exact(run, query.workload_key, query.device)
    if admitted(hit):
        assert hit is not None
        return LookupResult("exact", hit, 0.0)
    if not fallback:
        return None
    for key, distance in shapes.ranked(run, query, max_distance):
        hit = exact(run, key, query.device)
        if admitted(hit):  # None only if the config went away in between
            assert hit is not None
            return LookupResult("nearest_shape", hit, distance)
    if device_distance is None:
        return None
    by_device = {other.device_name: other for other in tuned(run, workload_key=query.workload_key)}
    for apart, name in rank_devices(query.device, by_device, device_distance):
        if admitted(by_device[name]):
            return LookupResult("similar_device", by_device[name], apart)
    return _similar_device_nearest_shape(
        run, query, shapes, device_distance, admitted, max_distance
    )


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


def _similar_device_nearest_shape(
    run: RunSql,
    query: LookupQuery,
    shapes: ShapeSource,
    device_distance: DeviceDistance,
    admitted: Callable[[BestRecord | None], bool],
    max_distance: float | None,
) -> LookupResult | None:
    """The nearest admitted tuned shape on the most similar other device that has shapes of
    the query's family and rank; its distance is the device distance, as in
    ``similar_device``."""
    names = family_devices(run, query.operator, query.dtype, query.layout)
    for apart, name in rank_devices(query.device, names, device_distance):
        for key, _ in shapes.ranked(run, replace(query, device=name), max_distance):
            if admitted(hit := exact(run, key, name)):
                assert hit is not None
                return LookupResult("similar_device_nearest_shape", hit, apart)
    return None
