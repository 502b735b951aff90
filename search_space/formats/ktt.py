"""KTT output files: the Kernel Tuning Toolkit's JSON record of a tuning run, imported.

KTT (2.x) writes ``Metadata`` (the device, the unit of time) and ``Results``: one per evaluated
configuration, with its parameter values (``Configuration``: name, value, type), ``Status``
(``Ok`` or why it failed) and its times: ``TotalDuration`` (the kernel's, the objective) and
``TotalOverhead`` (data movement, validation, the searcher's time, and the rest: compiling and
launching the kernels, read as the record's compile time). A file that covers a whole space (the
Benchmark Hub's KTT recordings are brute-forced) reads as a :class:`RecordedSpace`, like a Kernel
Tuner cache:

- its valid configs are the recorded ones (KTT's constraints are not in the file), and each
  parameter's values those its results take;
- KTT records no problem size, so the space's constants (parameters with one integer value,
  where KTT's examples put the problem's dimensions) stand in for it unless one is given.

Every problem with a file is a one-line :class:`FormatError` naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ktune.search_space.excerpt import excerpt
from ktune.search_space.formats.errors import FormatError
from ktune.search_space.formats.kernel_tuner import (
    MAX_MS,
    Record,
    RecordedSpace,
    recorded_space,
    unknown_device_name,
)
from ktune.search_space.formats.numbers import MS_PER_UNIT, finite_float
from ktune.search_space.formats.reading import format_error, is_number, read_bytes
from ktune.search_space.parameters import Parameter, ParameterError, Value
from ktune.search_space.workload import Workload, WorkloadError

__all__ = ["STATUS_BY_KTT", "NotKttError", "is_ktt_file", "load_ktt", "looks_like_ktt"]

#: KTT's ``ResultStatus`` -> ktune's trial status. A launch over the device's limits (local size
#: too large) is a failure at run time, as Kernel Tuner counts it.
STATUS_BY_KTT = {
    "Ok": "ok",
    "CompilationFailed": "compile_error",
    "ComputationFailed": "runtime_error",
    "ValidationFailed": "wrong_result",
    "DeviceLimitsExceeded": "runtime_error",
}


#: the parts of a result's ``TotalOverhead`` that are not compiling or launching its kernels
_FRAMEWORK_OVERHEADS = ("DataMovementOverhead", "ValidationOverhead", "SearcherOverhead")


def looks_like_ktt(data: Any) -> bool:
    """Whether parsed JSON is shaped like KTT output (``Metadata`` and ``Results``)."""
    return isinstance(data, dict) and isinstance(data.get("Metadata"), dict) and "Results" in data


def is_ktt_file(path: str | Path, max_bytes: int | None = None) -> bool:
    """Whether ``path`` holds KTT output (False for anything unreadable, or over ``max_bytes``)."""
    try:
        raw, _ = read_bytes(Path(path), max_bytes)
        return looks_like_ktt(json.loads(raw.decode("utf-8")))
    except (FormatError, UnicodeDecodeError, ValueError, RecursionError):
        return False


def load_ktt(
    path: str | Path,
    problem_size: Sequence[int] | None = None,
    max_bytes: int | None = None,
) -> RecordedSpace:
    """Read the KTT output at ``path`` (plain or gzip, at most ``max_bytes`` stored or inflated:
    see ``reading.read_bytes``). ``problem_size`` names the workload's shape (default: the
    space's one-valued integer parameters, else ``(1,)``)."""
    path = Path(path)
    raw, digest = read_bytes(path, max_bytes)
    data = _parse(path, raw)
    metadata, results = data["Metadata"], data["Results"]
    unit = metadata.get("TimeUnit", "Microseconds")
    if not isinstance(unit, str) or unit.strip().lower() not in MS_PER_UNIT:
        raise format_error(path, f"Metadata.TimeUnit {excerpt(unit)} is not a unit of time")
    scale = MS_PER_UNIT[unit.strip().lower()]
    if not isinstance(results, list) or not results:
        raise format_error(path, "Results must be a non-empty list")
    rows = [_row(path, i, r) for i, r in enumerate(results)]
    kernel = _kernel_name(path, results)
    parameters = _parameters(path, [values for values, _ in rows])
    records: dict[str, Record] = {}
    for i, (values, result) in enumerate(rows):
        config = dict(zip((p.name for p in parameters), values.values()))
        key = ",".join(map(str, config.values()))
        if key in records:
            raise format_error(path, f"Results[{i}] repeats the configuration {excerpt(config)}")
        records[key] = _record(path, i, config, key, result, scale)
    shape = tuple(problem_size) if problem_size is not None else _constants_shape(parameters)
    try:
        Workload(operator=kernel, shape=shape)
    except WorkloadError as exc:
        raise format_error(path, f"cannot name a workload {kernel!r} {shape}: {exc}") from None
    device = metadata.get("Device", "")
    if not isinstance(device, str):
        raise format_error(path, "Metadata.Device must be a string")
    device = device.strip() or unknown_device_name(digest)
    return recorded_space(path, digest, device, kernel, shape, "time", parameters, records)


class NotKttError(FormatError):
    """The file is not KTT output at all (not JSON, or JSON of another shape, such as a Kernel
    Tuner cache), as opposed to KTT output with a bad result."""


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise format_error(path, "not UTF-8 text, so not KTT output", NotKttError) from None
    except RecursionError:
        raise format_error(
            path, "not KTT output: the JSON is nested too deeply", NotKttError
        ) from None
    except ValueError as exc:  # JSONDecodeError, or an int with too many digits
        raise format_error(path, f"not JSON ({exc})", NotKttError) from None
    if not looks_like_ktt(data):
        raise format_error(path, "not KTT output: no Metadata object and Results list", NotKttError)
    out: dict[str, Any] = data
    return out


def _kernel_name(path: Path, results: list[dict[str, Any]]) -> str:
    names = {r.get("KernelName") for r in results}
    if len(names) != 1 or not isinstance(kernel := names.pop(), str) or not kernel.strip():
        raise format_error(path, "every result must name the same kernel (KernelName)")
    return kernel.strip()


def _row(path: Path, i: int, result: Any) -> tuple[dict[str, Value], dict[str, Any]]:
    """The parameter values of ``Results[i]`` (in the file's order) and the result itself."""
    if not isinstance(result, dict) or not isinstance(result.get("Configuration"), list):
        raise format_error(path, f"Results[{i}] has no Configuration list")
    values: dict[str, Value] = {}
    for pair in result["Configuration"]:
        if not isinstance(pair, dict) or not isinstance(pair.get("Name"), str):
            raise format_error(path, f"Results[{i}]: a Configuration entry has no Name")
        raw = pair.get("Value")
        if not (isinstance(raw, (int, float, str))) or (
            isinstance(raw, float) and not math.isfinite(raw)
        ):
            raise format_error(
                path, f"Results[{i}]: {pair['Name']}={excerpt(raw)} is not a number or a string"
            )
        if pair["Name"] in values:
            raise format_error(path, f"Results[{i}] gives {pair['Name']} twice")
        # KTT's Bool parameters are 0 / 1 in the kernel source
        values[pair["Name"]] = int(raw) if isinstance(raw, bool) else raw
    return values, result


def _parameters(path: Path, rows: list[dict[str, Value]]) -> tuple[Parameter, ...]:
    names = list(rows[0])
    seen: dict[str, dict[Value, None]] = {n: {} for n in names}
    for i, values in enumerate(rows):
        if list(values) != names:
            raise format_error(
                path, f"Results[{i}] has parameters {list(values)}, the first result {names}"
            )
        for n, v in values.items():
            seen[n][v] = None
    try:
        return tuple(Parameter.of(n, _ordered(list(vs))) for n, vs in seen.items())
    except (ParameterError, TypeError) as exc:
        raise format_error(path, f"bad parameter values: {exc}") from None


def _ordered(values: list[Value]) -> list[Value]:
    """Numbers ascending (the order ordered knobs walk in); strings as first seen."""
    if all(is_number(v) for v in values):
        return sorted(values, key=float)
    return values


def _record(
    path: Path, i: int, config: dict[str, Value], key: str, result: dict[str, Any], scale: float
) -> Record:
    status_name = result.get("Status")
    if status_name not in STATUS_BY_KTT:
        raise format_error(path, f"Results[{i}]: Status {excerpt(status_name)} is not KTT's")
    status = STATUS_BY_KTT[status_name]
    duration = _millis(path, i, result, "TotalDuration", scale)
    overhead = _millis(path, i, result, "TotalOverhead", scale)
    # KTT's overhead is data movement, validation and the searcher's own time, the rest
    # compiling and launching the kernels: the rest is what a measurement costs besides its runs
    framework_ms = min(
        overhead, sum(_millis(path, i, result, f, scale) for f in _FRAMEWORK_OVERHEADS)
    )
    return Record(
        config=config,
        key=key,
        status=status,
        time_ms=duration if status == "ok" else None,
        times_ms=(),
        compile_ms=overhead - framework_ms,
        bench_ms=duration if status == "ok" else 0.0,
        framework_ms=framework_ms,
    )


def _millis(path: Path, i: int, entry: dict[str, Any], field: str, scale: float) -> float:
    value = entry.get(field, 0.0)
    number = finite_float(value) if is_number(value) else None
    millis = None if number is None else number * scale
    if millis is None or not 0 <= millis <= MAX_MS:
        raise format_error(
            path,
            f"Results[{i}]: {field} {excerpt(value)} is not a duration from 0 to {MAX_MS:.0e} ms",
        )
    return millis


def _constants_shape(parameters: Sequence[Parameter]) -> tuple[int, ...]:
    """The one-valued positive integer parameters' values, in order (``(1,)`` when none)."""
    dims = tuple(
        int(p.values[0])
        for p in parameters
        if len(p.values) == 1 and type(p.values[0]) is int and p.values[0] > 0
    )
    return dims or (1,)
