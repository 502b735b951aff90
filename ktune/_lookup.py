"""``ktune.lookup``: the best known config of a workload on a device, with the tier it came from."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from ktune._answer import Answer
from ktune._model_tier import model_choice
from ktune._similarity import catalog_knows, device_distance
from ktune.cost_model.devices import normalise_name
from ktune.db import LookupQuery, TuningLog, resolve_url
from ktune.search_space.workload import Workload, WorkloadError
from ktune.search_space.workload import parse_shape as workload_shape

__all__ = ["Answer", "LookupInputError", "lookup", "parse_shape"]

_FIELDS = ("operator", "shape", "dtype", "layout")


class LookupInputError(ValueError):
    """The question is malformed: ``field`` names what is wrong (as the REST API's 422 does)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def parse_shape(shape: str | Sequence[int]) -> tuple[int, ...]:
    """The shape grammar of every command (:func:`ktune.search_space.workload.parse_shape`),
    its errors as a :class:`LookupInputError` of the field ``shape``."""
    try:
        return workload_shape(shape)
    except WorkloadError as exc:
        raise LookupInputError("shape", str(exc)) from None


def _query(
    operator: str | None,
    shape: str | Sequence[int] | None,
    dtype: str,
    layout: str,
    device: str,
    workload: str | None,
) -> LookupQuery:
    if not device or not device.strip():
        raise LookupInputError("device", "give the device name, e.g. 'NVIDIA A100-PCIE-40GB'")
    for field, text in (
        ("device", device),
        ("operator", operator),
        ("workload", workload),
        ("dtype", dtype),
        ("layout", layout),
    ):
        if text is not None and "\x00" in text:
            raise LookupInputError(field, "must not contain NUL characters")
    if workload is not None:
        if operator is not None or shape is not None or dtype not in ("", "-") or layout:
            raise LookupInputError(
                "workload", "give a workload key or operator, shape, dtype and layout, not both"
            )
        try:
            wl = Workload.from_key(workload)
        except WorkloadError as exc:
            raise LookupInputError("workload", str(exc)) from None
    else:
        if not operator:
            raise LookupInputError("operator", "give an operator (or a workload key)")
        if shape is None:
            raise LookupInputError("shape", "give the problem shape, e.g. 4096x4096")
        dims = parse_shape(shape)
        try:
            wl = Workload(operator, dims, "" if dtype == "-" else dtype, layout)
        except WorkloadError as exc:
            message = str(exc)
            field = next((f for f in _FIELDS if message.startswith(f)), "operator")
            raise LookupInputError(field, message) from None
    return LookupQuery(wl.key, wl.operator, wl.shape, wl.dtype, wl.layout, device.strip())


def lookup(
    operator: str | None = None,
    shape: str | Sequence[int] | None = None,
    *,
    device: str,
    dtype: str | None = "",
    layout: str | None = "",
    workload: str | None = None,
    db: TuningLog | str | None = None,
    fallback: bool = True,
) -> Answer | None:
    """The best known config of a workload on ``device``, or None when no tier has one.

    Ask by ``operator`` + ``shape`` (+ ``dtype``, ``layout``) or by a ``workload`` key. The
    tiers, tried in order: ``exact``; ``nearest_shape`` (same operator, dtype, layout and
    rank on this device); ``similar_device`` (this workload on the nearest device of the cost
    model's catalog); ``cost_model`` (a registered model's choice);
    ``similar_device_nearest_shape`` (both at once: the nearest tuned shape on the nearest
    device that has shapes of this operator). ``fallback=False`` asks for an exact answer
    only. ``db``: an open log, a URL, or None for the default log; a URL is opened read-only
    (nothing is created or migrated).

    Raises :class:`LookupInputError` (a ``ValueError``) for a malformed question and
    ``db.DatabaseError`` when the log cannot be read (no such log, an older schema: run
    ``ktune db upgrade``, an unreachable server).
    """
    query = _query(
        operator,
        shape,
        "" if dtype is None else dtype,
        "" if layout is None else layout,
        device,
        workload,
    )
    tlog = db if isinstance(db, TuningLog) else _open(db)
    distance = device_distance() if fallback else None
    result = tlog.lookup(query, fallback=fallback, device_distance=distance)
    # An exact or nearest-shape answer found the device under this very name; only after a
    # miss may another spelling of it be the log's (the hot paths ask nothing more).
    if result is None or result.tier not in ("exact", "nearest_shape"):
        canonical = canonical_device(tlog, query.device)
        if canonical != query.device:
            query = replace(query, device=canonical)
            result = tlog.lookup(query, fallback=fallback, device_distance=distance)
    if result is not None and result.tier != "similar_device_nearest_shape":
        return Answer.from_result(query, result)
    if result is None:
        _check_known(tlog, query)
    # Neither this shape nor this device was measured: a model trained on the log ranks this
    # very workload's space for this device; where it cannot (an operator without a space, a
    # device without a spec), the measured nearest shape of the most similar device answers.
    chosen = model_choice(tlog, query) if fallback else None
    if chosen is None and result is not None:
        return Answer.from_result(query, result)
    return chosen


def canonical_device(tlog: TuningLog, name: str) -> str:
    """The log's own spelling of device ``name``: the name itself when the log has it, else
    the one device of the log whose name normalises alike (case, ``-``/``_``/spaces, a
    leading vendor word: ``nvidia rtx a4000`` is ``NVIDIA RTX A4000``), else ``name``."""
    if tlog.get_device(name) is not None:
        return name
    key = normalise_name(name)
    same = [d.name for d in tlog.list_devices() if normalise_name(d.name) == key]
    return same[0] if len(same) == 1 else name


def _check_known(tlog: TuningLog, query: LookupQuery) -> None:
    """After a miss: tell a question the log cannot answer from one it can never answer."""
    ranks = tlog.operator_ranks(query.operator)
    if ranks and len(query.shape) not in ranks:
        expected = " or ".join(str(r) for r in sorted(ranks))
        raise LookupInputError(
            "shape",
            f"{query.operator} workloads have {expected} dimension(s), "
            f"got {len(query.shape)}: {list(query.shape)}",
        )
    if tlog.get_device(query.device) is None and not catalog_knows(query.device):
        raise LookupInputError(
            "device", f"unknown device {query.device!r}: not in the tuning log nor the catalog"
        )


_logs: dict[str, TuningLog] = {}
_logs_lock = threading.Lock()


def _open(url: str | None) -> TuningLog:
    """One open log per URL for the life of the process: a lookup must not reconnect.

    Opened read-only: a build that looks up configs creates, migrates and changes nothing
    (a log that does not exist is an error that names it, not a new empty log)."""
    resolved = resolve_url(url, make_dir=False)
    with _logs_lock:
        tlog = _logs.get(resolved)
        if tlog is None:
            tlog = _logs[resolved] = TuningLog.open(resolved, read_only=True)
        return tlog
