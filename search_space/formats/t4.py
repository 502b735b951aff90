"""T4 results files: the auto-tuning community's JSON format of measured configurations.

A T4 file (schema 1.x, written by Kernel Tuner's ``store_output_file`` and found beside the
caches of the Benchmark Hub) lists one result per evaluated configuration: its parameter values,
``invalidity`` (``correct`` or why it failed), the measured objectives and the times spent
(compilation, the individual runs). It names neither the kernel's space nor the device, so a
T4 file is read together with the T1 spec of its space and the name of the GPU it was measured
on; the result is a :class:`RecordedSpace` like a Kernel Tuner cache's, which imports into the
tuning log the same way (and joins the same workload: kernel name and problem size come from
the T1 spec). Every problem with a file is a one-line :class:`FormatError` naming it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ktune.search_space.excerpt import excerpt
from ktune.search_space.formats.errors import FormatError
from ktune.search_space.formats.kernel_tuner import (
    FAILURE_BY_STATUS,
    MAX_MS,
    Record,
    RecordedSpace,
    RecordLike,
)
from ktune.search_space.formats.numbers import MS_PER_UNIT, finite_float
from ktune.search_space.formats.reading import (
    MISSING,
    canonical,
    format_error,
    is_number,
    read_bytes,
    value_tables,
)
from ktune.search_space.formats.t1 import T1Spec
from ktune.search_space.formats.writing import first_by_config, replace_atomically
from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace

__all__ = [
    "STATUS_BY_INVALIDITY",
    "NotT4Error",
    "is_t4_file",
    "load_t4",
    "looks_like_t4",
    "write_t4",
]

#: T4's ``invalidity`` -> ktune's trial status
STATUS_BY_INVALIDITY = {
    "correct": "ok",
    "compile": "compile_error",
    "runtime": "runtime_error",
    "timeout": "timeout",
    "correctness": "wrong_result",
    "constraints": "invalid",
}
INVALIDITY_BY_STATUS = {status: invalidity for invalidity, status in STATUS_BY_INVALIDITY.items()}
_OBJECTIVE = "time"
#: the schema version written (the T4 schema Kernel Tuner 1.5 ships)
SCHEMA_VERSION = "1.0.0"


def looks_like_t4(data: Any) -> bool:
    """Whether parsed JSON is shaped like a T4 results document (not a Kernel Tuner cache)."""
    return (
        isinstance(data, dict)
        and "results" in data
        and "schema_version" in data
        and "cache" not in data
    )


def is_t4_file(path: str | Path) -> bool:
    """Whether ``path`` holds a T4 results document (False for anything unreadable)."""
    try:
        raw, _ = read_bytes(Path(path))
        return looks_like_t4(json.loads(raw.decode("utf-8")))
    except (FormatError, UnicodeDecodeError, ValueError, RecursionError):
        return False


def load_t4(
    path: str | Path, spec: T1Spec, device_name: str, max_bytes: int | None = None
) -> RecordedSpace:
    """Read the T4 results at ``path``, measured on ``device_name``, of the space ``spec``
    (at most ``max_bytes`` stored or inflated: see ``reading.read_bytes``)."""
    path = Path(path)
    device = device_name.strip()
    if not device:
        raise format_error(
            path, "a T4 file does not name its GPU: the device name must not be empty"
        )
    raw, digest = read_bytes(path, max_bytes)
    data = _parse(path, raw)
    version = data["schema_version"]
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise format_error(path, f"T4 schema_version {excerpt(version)} is not 1.x")
    results = data["results"]
    if not isinstance(results, list) or not results:
        raise format_error(path, "results must be a non-empty list")
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise format_error(path, "metadata must be an object")
    unit = metadata.get("timeunit", "milliseconds")
    if not isinstance(unit, str) or unit.strip().lower() not in MS_PER_UNIT:
        raise format_error(path, f"metadata.timeunit {excerpt(unit)} is not a unit of time")
    scale = MS_PER_UNIT[unit.strip().lower()]
    parameters = spec.space.parameters
    records = _records(path, parameters, results, scale)
    outside = [r for r in records.values() if r.status != "invalid" and r.config not in spec.space]
    if outside:
        raise format_error(
            path,
            f"{len(outside)} measured configuration(s) are outside the T1 spec's space "
            f"(its values or constraints), e.g. {dict(outside[0].config)}: "
            "is it the spec of these results?",
        )
    valid = [r.config for r in records.values() if r.status != "invalid"]
    if not valid:
        raise format_error(
            path, "every result is invalid (constraints): no configuration was measured"
        )
    try:
        space = SearchSpace.from_configs(parameters, valid, name=f"{spec.kernel_name}@{device}")
    except ValueError as exc:
        raise format_error(path, f"cannot build the search space: {exc}") from None
    # one identity per (results, spec, device): the same results file read as another GPU's,
    # or against another spec, is another recording
    identity = hashlib.sha256(
        f"{digest}\0{spec.space.fingerprint()}\0{device}".encode()
    ).hexdigest()
    return RecordedSpace(
        path=path,
        digest=identity,
        device_name=device,
        kernel_name=spec.kernel_name,
        problem_size=spec.problem_size,
        objective=_OBJECTIVE,
        parameters=tuple(parameters),
        records=MappingProxyType(records),
        space=space,
    )


class NotT4Error(FormatError):
    """The file is not a T4 results document at all (not JSON, or JSON of another shape, such
    as a Kernel Tuner cache), as opposed to a T4 document with a bad result."""


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise format_error(path, "not UTF-8 text, so not a T4 results file", NotT4Error) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise format_error(
            path, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", NotT4Error
        ) from None
    except (ValueError, RecursionError):  # an int with too many digits; nesting too deep
        raise format_error(
            path,
            "not a T4 results file: the JSON cannot be read as numbers and objects",
            NotT4Error,
        ) from None
    if not looks_like_t4(data):
        raise format_error(
            path,
            "not a T4 results file (a JSON object with schema_version and results)",
            NotT4Error,
        )
    return data  # type: ignore[no-any-return]


def _records(
    path: Path, parameters: Sequence[Parameter], results: list[Any], scale: float
) -> dict[str, Record]:
    names = [p.name for p in parameters]
    tables = value_tables(parameters)
    records: dict[str, Record] = {}
    first: dict[str, int] = {}
    for i, result in enumerate(results):
        where = f"result #{i + 1}"
        if not isinstance(result, dict):
            raise format_error(path, f"{where} is not an object")
        config = _config(path, where, result.get("configuration"), names, tables)
        key = ",".join(map(str, config.values()))
        if key in records:
            raise format_error(
                path, f"{where} repeats the configuration of result #{first[key] + 1}"
            )
        invalidity = result.get("invalidity")
        status = STATUS_BY_INVALIDITY.get(invalidity) if isinstance(invalidity, str) else None
        if status is None:
            raise format_error(
                path,
                f"{where}: invalidity {excerpt(invalidity)} "
                f"is not one of {', '.join(STATUS_BY_INVALIDITY)}",
            )
        times = result.get("times", {})
        if not isinstance(times, dict):
            raise format_error(path, f"{where}: times must be an object")
        runtimes = _runtimes(path, where, times.get("runtimes", []), scale)
        time_ms = (
            _objective_ms(path, where, result.get("measurements"), scale)
            if status == "ok"
            else None
        )
        compile_ms = _millis(path, where, times, ("compilation", "compilation_time"), scale)
        records[key] = Record(
            config=config,
            key=key,
            status=status,
            time_ms=time_ms,
            times_ms=runtimes,
            compile_ms=compile_ms,
            bench_ms=min(
                math.fsum(runtimes), MAX_MS
            ),  # T4 keeps the runs, not the benchmark's wall time
            framework_ms=_millis(path, where, times, ("framework",), scale),
        )
        first[key] = i
    return records


def _config(
    path: Path, where: str, given: Any, names: list[str], tables: list[dict[Any, Any]]
) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise format_error(path, f"{where}: configuration must be an object of parameter values")
    extra = sorted(set(given) - set(names))
    if extra:
        raise format_error(
            path,
            f"{where}: {excerpt(extra[0])} is not a parameter of the T1 spec "
            "(is it the spec of these results?)",
        )
    config: dict[str, Any] = {}
    for name, table in zip(names, tables):
        if name not in given:
            raise format_error(path, f"{where}: configuration lacks parameter {excerpt(name)}")
        value = canonical(table, given[name])
        if value is MISSING:
            raise format_error(
                path,
                f"{where}: {name}={excerpt(given[name])} "
                f"is not among the values of {name} in the T1 spec",
            )
        config[name] = value
    return config


def _objective_ms(path: Path, where: str, measurements: Any, scale: float) -> float:
    """The ``time`` measurement of a correct result, in milliseconds."""
    found = MISSING
    if isinstance(measurements, list):
        named = (m for m in measurements if isinstance(m, Mapping) and m.get("name") == _OBJECTIVE)
        found = next((m.get("value", MISSING) for m in named), MISSING)
    if found is MISSING:
        raise format_error(path, f"{where} is correct but has no {_OBJECTIVE!r} measurement")
    value = finite_float(found) if is_number(found) else None
    if value is None or not 0 < value * scale <= MAX_MS:
        raise format_error(
            path, f"{where}: {_OBJECTIVE} {excerpt(found)} is not a positive duration"
        )
    return value * scale


def _runtimes(path: Path, where: str, runtimes: Any, scale: float) -> tuple[float, ...]:
    if not isinstance(runtimes, list) or not all(is_number(t) for t in runtimes):
        raise format_error(path, f"{where}: times.runtimes must be a list of numbers")
    out = tuple(float(t) * scale if finite_float(t) is not None else math.nan for t in runtimes)
    if not all(0 <= t <= MAX_MS for t in out):  # a NaN fails the comparison
        raise format_error(
            path, f"{where}: times.runtimes must each be a duration from 0 to {MAX_MS:.0e} ms"
        )
    return out


def _millis(
    path: Path, where: str, times: Mapping[str, Any], fields: tuple[str, ...], scale: float
) -> float:
    value = next((times[f] for f in fields if f in times), 0.0)
    millis = finite_float(value) if is_number(value) else None
    if millis is None or not 0 <= millis * scale <= MAX_MS:
        raise format_error(path, f"{where}: times.{fields[0]} {excerpt(value)} is not a duration")
    return millis * scale


def write_t4(
    path: str | Path, *, parameters: Sequence[Parameter], records: Iterable[RecordLike]
) -> int:
    """Write ``records`` as a T4 results file (gzip when ``path`` ends in ``.gz``), atomically;
    returns how many results it holds. Times are in milliseconds; a failed result's ``time``
    is Kernel Tuner's failure name, as Kernel Tuner writes it. When a config comes twice, the
    first record wins."""
    path = Path(path)
    now = str(datetime.now(UTC))
    results = [
        _result(config, record, now)
        for config, record in first_by_config(parameters, records).values()
    ]
    doc = {
        "schema_version": SCHEMA_VERSION,
        "metadata": {"timeunit": "milliseconds"},
        "results": results,
    }
    data = json.dumps(doc, allow_nan=False).encode()
    replace_atomically(path, gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return len(results)


def _result(config: dict[str, Any], record: RecordLike, timestamp: str) -> dict[str, Any]:
    invalidity = INVALIDITY_BY_STATUS.get(record.status)
    if invalidity is None:
        raise ValueError(f"record of {config} has unknown status {record.status!r}")
    value: float | str
    if record.status == "ok":
        if record.time_ms is None or not 0 < record.time_ms < math.inf:
            raise ValueError(f"ok record of {config} has time {record.time_ms!r}")
        value = float(record.time_ms)
    else:
        value = FAILURE_BY_STATUS[record.status]
    stamp = getattr(record, "timestamp", None)
    return {
        "timestamp": str(stamp) if stamp else timestamp,
        "configuration": config,
        "times": {
            "compilation": float(record.compile_ms),
            "framework": float(getattr(record, "framework_ms", 0.0) or 0.0),
            "search_algorithm": 0,
            "validation": 0,
            "runtimes": [float(t) for t in record.times_ms],
        },
        "invalidity": invalidity,
        "correctness": 1 if record.status == "ok" else 0,
        "measurements": [
            {"name": _OBJECTIVE, "value": value, "unit": "ms" if record.status == "ok" else ""}
        ],
        "objectives": [_OBJECTIVE],
    }
