"""Kernel Tuner cache files: import as a :class:`RecordedSpace`, export from trial records.

A cache file is a JSON header (device, kernel, problem size, tunable parameters, objective)
plus ``cache``: a map from the comma-joined parameter values (in ``tune_params_keys``
order) to one measurement each, whose ``time`` is either milliseconds or a failure string.
Kernel Tuner appends records while it tunes and closes the JSON only at the end, so a plain
file that stops after a record is repaired the way Kernel Tuner's own ``read_cache`` does.
Every problem with a file is a one-line :class:`FormatError` naming it.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from ktune.search_space.excerpt import excerpt
from ktune.search_space.formats.numbers import finite_float
from ktune.search_space.formats.reading import MISSING as _MISSING
from ktune.search_space.formats.reading import canonical as _canonical
from ktune.search_space.formats.reading import format_error as _error
from ktune.search_space.formats.reading import is_number as _is_number
from ktune.search_space.formats.reading import read_bytes as _read_bytes
from ktune.search_space.formats.reading import value_tables as _value_tables
from ktune.search_space.formats.writing import first_by_config
from ktune.search_space.formats.writing import replace_atomically as _replace_atomically
from ktune.search_space.parameters import Config, Parameter, ParameterError
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload, WorkloadError

__all__ = [
    "FAILURE_BY_STATUS",
    "STATUS_BY_FAILURE",
    "Record",
    "RecordLike",
    "RecordedSpace",
    "load_cache",
    "recorded_space",
    "renamed",
    "write_cache",
    "write_recording",
]

STATUS_BY_FAILURE = {
    "InvalidConfig": "invalid",
    "CompilationFailedConfig": "compile_error",
    "RuntimeFailedConfig": "runtime_error",
}
# Kernel Tuner has no timeout or wrong-result failure: both are failures at run time.
FAILURE_BY_STATUS = {
    "invalid": "InvalidConfig",
    "compile_error": "CompilationFailedConfig",
    "runtime_error": "RuntimeFailedConfig",
    "timeout": "RuntimeFailedConfig",
    "wrong_result": "RuntimeFailedConfig",
}

_HEADER = ("device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params", "cache")
_NUMBER_TYPES = {int, float}
#: the longest duration a record may give, in ms (about 31 years): anything longer is not a
#: measurement, and bounding each one keeps sums of them (a job's clock) finite
MAX_MS = 1e12


@dataclass(frozen=True, slots=True)
class Record:
    """One recorded measurement; ``key`` is Kernel Tuner's cache key of ``config``."""

    config: Config
    key: str
    status: str  # "ok" | "invalid" | "compile_error" | "runtime_error"
    time_ms: float | None
    times_ms: tuple[float, ...]
    compile_ms: float
    bench_ms: float
    framework_ms: float


@dataclass(frozen=True, eq=False)
class RecordedSpace:
    """A brute-forced space read from a cache file: its header, records and valid configs."""

    path: Path
    digest: str  # sha256 hex of the file's bytes, as stored (compressed or not)
    device_name: str
    kernel_name: str
    problem_size: tuple[int, ...]
    objective: str
    parameters: tuple[Parameter, ...]
    records: Mapping[str, Record]
    space: SearchSpace  # every recorded config except the InvalidConfig ones

    def lookup(self, config: Mapping[str, Any]) -> Record | None:
        """The record of ``config``, or ``None`` when it was not recorded."""
        try:
            return self.records.get(",".join(str(config[p.name]) for p in self.parameters))
        except KeyError:
            return None

    @cached_property
    def optimum(self) -> Record | None:
        """The fastest ``ok`` record (``None`` when every config failed)."""
        ok = [r for r in self.records.values() if r.status == "ok"]
        return min(ok, key=lambda r: r.time_ms or 0.0) if ok else None

    @cached_property
    def median_measurement_ms(self) -> float:
        """Median cost of one replayed measurement (recorded compile + benchmark time) over the
        configs that were tried (failed ones too: they cost a compile; 0 when none were)."""
        costs = [r.compile_ms + r.bench_ms for r in self.records.values() if r.status != "invalid"]
        return float(statistics.median(costs)) if costs else 0.0

    def workload(self) -> Workload:
        return Workload(operator=self.kernel_name, shape=self.problem_size)


class RecordLike(Protocol):
    """What :func:`write_cache` reads from a record: a :class:`Record` or a logged trial."""

    @property
    def config(self) -> Mapping[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def time_ms(self) -> float | None: ...
    @property
    def times_ms(self) -> Sequence[float]: ...
    @property
    def compile_ms(self) -> float: ...
    @property
    def bench_ms(self) -> float: ...


# ---------------------------------------------------------------------------- import


def load_cache(path: str | Path, max_bytes: int | None = None) -> RecordedSpace:
    """Read a Kernel Tuner cache file (plain or gzip, closed or not) of at most ``max_bytes``
    stored or inflated (default: ``reading.inflation_limit``; past it, ``reading.TooLarge``)."""
    path = Path(path)
    try:
        return _load(path, max_bytes)
    except RecursionError:  # JSON nested deeper than Python's recursion limit
        raise _error(path, "not a Kernel Tuner cache: the JSON is nested too deeply") from None


def _load(path: Path, max_bytes: int | None) -> RecordedSpace:
    raw, digest = _read_bytes(path, max_bytes)
    data = _parse_json(path, raw)
    missing = [f for f in _HEADER if f not in data]
    if missing:
        raise _error(path, f"missing header field(s) {', '.join(missing)}")
    for field in ("device_name", "kernel_name"):
        if not isinstance(data[field], str):
            raise _error(path, f"{field} must be a string")
    problem_size = _problem_size(path, data["problem_size"])
    _check_kernel_name(path, data["kernel_name"], problem_size)
    objective = _objective(path, data.get("objective", "time"))
    parameters = _parameters(path, data["tune_params_keys"], data["tune_params"])
    records = _records(path, parameters, data["cache"])
    if all(r.status == "invalid" for r in records.values()):
        raise _error(path, "every record is InvalidConfig: the space is empty")
    # Kernel Tuner writes an empty name where the driver reported none (seen on AMD MI250X
    # recordings of the Benchmark Hub): the device is unknown, and named after the recording so
    # that two unknown GPUs never share a device in the log
    device_name = data["device_name"].strip() or unknown_device_name(digest)
    return recorded_space(
        path, digest, device_name, data["kernel_name"], problem_size, objective, parameters, records
    )


def recorded_space(
    path: Path,
    digest: str,
    device_name: str,
    kernel_name: str,
    problem_size: tuple[int, ...],
    objective: str,
    parameters: tuple[Parameter, ...],
    records: dict[str, Record],
) -> RecordedSpace:
    """A recording's :class:`RecordedSpace`: its space is every recorded config but the
    ``invalid`` ones (a one-line :class:`FormatError` when they cannot make one)."""
    valid = [r.config for r in records.values() if r.status != "invalid"]
    try:
        space = SearchSpace.from_configs(parameters, valid, name=f"{kernel_name}@{device_name}")
    except ValueError as exc:
        raise _error(path, f"cannot build the search space: {exc}") from None
    return RecordedSpace(
        path=path,
        digest=digest,
        device_name=device_name,
        kernel_name=kernel_name,
        problem_size=problem_size,
        objective=objective,
        parameters=parameters,
        records=MappingProxyType(records),
        space=space,
    )


def renamed(rec: RecordedSpace, device_name: str) -> RecordedSpace:
    """``rec`` as measured on ``device_name`` (for a cache that names no GPU, or a wrong one);
    its digest then covers the name too, so the same file under two names is two recordings."""
    device = device_name.strip()
    if not device:
        raise ValueError("a device name must not be empty")
    if device == rec.device_name:
        return rec
    digest = hashlib.sha256(f"{rec.digest}\0{device}".encode()).hexdigest()
    return dataclasses.replace(rec, device_name=device, digest=digest)


def unknown_device_name(digest: str) -> str:
    """The device name given to a recording whose header names none."""
    return f"unknown GPU (recording {digest[:12]})"


def _parse_json(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _error(path, "not UTF-8 text, so not a JSON cache file") from None
    if not text.strip():
        raise _error(path, "the file is empty")
    try:
        data = _loads(path, text)
    except json.JSONDecodeError as exc:
        try:
            data = _loads(path, _close_open_cache(text))
        except json.JSONDecodeError:
            raise _error(
                path, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
    if not isinstance(data, dict):
        raise _error(path, "not a Kernel Tuner cache: the top level is not a JSON object")
    return data


def _loads(path: Path, text: str) -> Any:
    """``json.loads``; an int over Python's ``int_max_str_digits`` (a ValueError that is not a
    JSONDecodeError) is a :class:`FormatError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise _error(path, "not a Kernel Tuner cache: an integer has too many digits") from None


def _close_open_cache(text: str) -> str:
    """Close a cache Kernel Tuner left open for appending (as ``correct_open_cache`` does)."""
    text = text.rstrip()
    return text.removesuffix(",") + "}\n}"


def _problem_size(path: Path, size: Any) -> tuple[int, ...]:
    dims = size if isinstance(size, list) else [size]
    if not dims or any(type(d) is not int or d <= 0 for d in dims):
        raise _error(path, f"problem_size {excerpt(size)} is not a positive int or a list of them")
    return tuple(dims)


def _check_kernel_name(path: Path, kernel_name: str, problem_size: tuple[int, ...]) -> None:
    """The kernel is the operator of the recording's workload: its name must be a valid one."""
    try:
        Workload(operator=kernel_name, shape=problem_size)
    except WorkloadError as exc:
        raise _error(
            path, f"kernel_name {excerpt(kernel_name)} cannot name a workload: {exc}"
        ) from None


def _objective(path: Path, objective: Any) -> str:
    # Kernel Tuner 1.5 writes the objective as a one-element list; older files as a string.
    if isinstance(objective, list) and objective and isinstance(objective[0], str):
        return objective[0]
    if not isinstance(objective, str):
        raise _error(path, f"objective {excerpt(objective)} is not a string")
    return objective


def _parameters(path: Path, keys: Any, tune_params: Any) -> tuple[Parameter, ...]:
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise _error(path, "tune_params_keys must be a list of names")
    if not isinstance(tune_params, dict):
        raise _error(path, "tune_params must be an object of value lists")
    if len(set(keys)) != len(keys) or set(keys) != set(tune_params):
        raise _error(path, f"tune_params_keys {keys} do not match tune_params {list(tune_params)}")
    try:
        parameters = tuple(Parameter.of(k, tune_params[k]) for k in keys)
    except (ParameterError, TypeError, OverflowError) as exc:  # overflow: [1.5, 10**400]
        raise _error(path, f"bad tune_params: {exc}") from None
    return parameters


def _records(path: Path, parameters: Sequence[Parameter], cache: Any) -> dict[str, Record]:
    if not isinstance(cache, dict):
        raise _error(path, "cache must be an object of records")
    if not cache:
        raise _error(path, "the cache has no records")
    names = [p.name for p in parameters]
    tables = _value_tables(parameters)
    records: dict[str, Record] = {}
    for key, entry in cache.items():
        if not isinstance(entry, dict):
            raise _error(path, f"record {excerpt(key)} is not an object")
        try:
            raw = [entry[n] for n in names]
        except KeyError as exc:
            raise _error(path, f"record {excerpt(key)} lacks parameter {exc.args[0]!r}") from None
        if ",".join(map(str, raw)) != key:
            raise _error(
                path,
                f"record key {excerpt(key)} does not match its parameter values {excerpt(raw)}",
            )
        values = [_canonical(t, v) for t, v in zip(tables, raw)]
        for name, value, canon in zip(names, raw, values):
            if canon is _MISSING:
                raise _error(
                    path,
                    f"record {excerpt(key)}: {name}={excerpt(value)} "
                    f"is not among the values of {name}",
                )
        config = dict(zip(names, values))
        canon_key = ",".join(map(str, values))
        if canon_key in records:
            raise _error(
                path,
                f"record {excerpt(key)} repeats the config of {excerpt(records[canon_key].key)}",
            )
        status, time_ms = _status_and_time(path, key, entry)
        records[canon_key] = Record(
            config=config,
            key=canon_key,
            status=status,
            time_ms=time_ms,
            times_ms=_times(path, key, entry.get("times", [])),
            compile_ms=_millis(path, key, entry, "compile_time"),
            bench_ms=_millis(path, key, entry, "benchmark_time"),
            framework_ms=_millis(path, key, entry, "framework_time"),
        )
    return records


def _status_and_time(path: Path, key: str, entry: dict[str, Any]) -> tuple[str, float | None]:
    time = entry.get("time", _MISSING)
    if isinstance(time, str) and time in STATUS_BY_FAILURE:
        return STATUS_BY_FAILURE[time], None
    if time is _MISSING:
        raise _error(path, f"record {excerpt(key)} has no time")
    if not _is_number(time):
        raise _error(
            path,
            f"record {excerpt(key)}: time {excerpt(time)} is neither a number nor a known failure",
        )
    value = finite_float(time)
    if value is None or not 0 <= value <= MAX_MS:
        raise _error(path, f"record {excerpt(key)}: time {excerpt(time)} {_NOT_A_DURATION}")
    return "ok", value


def _times(path: Path, key: str, times: Any) -> tuple[float, ...]:
    # set(map(type, ...)) runs at C speed: this is the hot loop of loading a large file.
    if not isinstance(times, list) or not set(map(type, times)) <= _NUMBER_TYPES:
        raise _error(path, f"record {excerpt(key)}: times must be a list of numbers")
    try:
        out = tuple(map(float, times))
    except OverflowError:  # an int beyond the float range
        raise _error(path, f"record {excerpt(key)}: times must each be {_DURATION}") from None
    if not out:
        return out
    # C-speed passes: min and max skip a NaN (it compares false), the sum does not.
    if min(out) >= 0 and max(out) <= MAX_MS and not math.isnan(math.fsum(out)):
        return out
    raise _error(path, f"record {excerpt(key)}: times must each be {_DURATION}")


_DURATION = f"a number of milliseconds from 0 to {MAX_MS:.0e}"
_NOT_A_DURATION = f"is not {_DURATION}"


def _millis(path: Path, key: str, entry: dict[str, Any], field: str) -> float:
    value = entry.get(field, 0.0)
    millis = finite_float(value) if _is_number(value) else None
    if millis is None or not 0 <= millis <= MAX_MS:
        raise _error(path, f"record {excerpt(key)}: {field} {excerpt(value)} {_NOT_A_DURATION}")
    return millis


# ---------------------------------------------------------------------------- export


def write_cache(
    path: str | Path,
    *,
    device_name: str,
    kernel_name: str,
    problem_size: Sequence[int] | int,
    parameters: Sequence[Parameter],
    records: Iterable[RecordLike],
    objective: str = "time",
) -> None:
    """Write a cache file Kernel Tuner 1.5 can load (gzip when ``path`` ends in ``.gz``).

    The layout is Kernel Tuner's own: the header, then one record per line. When a config
    comes twice, the first record wins, as in Kernel Tuner's ``store_cache``. The file is
    replaced atomically, so a crash never leaves half of it. Kernel Tuner reads only plain
    ``.json`` files; the gzip form is for archives and :func:`load_cache`.
    """
    path = Path(path)
    names = [p.name for p in parameters]
    now = str(datetime.now(UTC))
    entries = {
        key: _entry(config, record, now)
        for key, (config, record) in first_by_config(parameters, records).items()
    }
    header = {
        "device_name": device_name,
        "kernel_name": kernel_name,
        "problem_size": problem_size
        if isinstance(problem_size, int)
        else [int(d) for d in problem_size],
        "tune_params_keys": names,
        "tune_params": {p.name: list(p.values) for p in parameters},
        "objective": objective,
        "cache": {},
    }
    text = json.dumps(header, indent="")[:-3]  # up to and including '"cache": {'
    text += ",".join("\n" + json.dumps({k: e}, allow_nan=False)[1:-1] for k, e in entries.items())
    data = (text + "}\n}").encode()
    _replace_atomically(path, gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)


def write_recording(
    path: str | Path,
    rec: RecordedSpace,
    *,
    parameters: Sequence[Parameter] | None = None,
    records: Iterable[RecordLike] | None = None,
) -> None:
    """``rec`` as a cache file with its own header (:func:`write_cache`), or a part of it:
    its knobs narrowed to ``parameters``, only ``records`` kept."""
    write_cache(
        path,
        device_name=rec.device_name,
        kernel_name=rec.kernel_name,
        problem_size=list(rec.problem_size),
        parameters=rec.parameters if parameters is None else parameters,
        records=rec.records.values() if records is None else records,
        objective=rec.objective,
    )


def _entry(config: dict[str, Any], record: RecordLike, timestamp: str) -> dict[str, Any]:
    entry: dict[str, Any] = dict(config)
    times = [float(t) for t in record.times_ms]
    if record.status == "ok":
        if record.time_ms is None or not (0 <= record.time_ms < math.inf):
            raise ValueError(f"ok record of {config} has time {record.time_ms!r}")
        entry["time"] = float(record.time_ms)
        entry["times"] = times
    elif record.status in FAILURE_BY_STATUS:
        entry["time"] = FAILURE_BY_STATUS[record.status]
        if times:
            entry["times"] = times
    else:
        raise ValueError(f"record of {config} has unknown status {record.status!r}")
    stamp = getattr(record, "timestamp", None)
    entry.update(
        compile_time=float(record.compile_ms),
        verification_time=0,
        benchmark_time=float(record.bench_ms),
        strategy_time=0,
        framework_time=float(getattr(record, "framework_ms", 0.0) or 0.0),
        timestamp=str(stamp) if stamp else timestamp,
    )
    return entry
