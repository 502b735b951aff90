"""``ktune.lookup``: the best known config of a workload on a device, with the tier it came from.

The log answers the tiers it can (``ktune.db.lookup``: exact, nearest shape, similar device, similar
device's nearest shape); above it, this module tries another spelling of the device name and
asks the cost model before the last of them. ``ktune best``, ``GET /v1/best`` and the C header
writer all answer through :func:`answer_from`.

What is loaded is what a question reaches: an exact or nearest-shape answer from a log opened
by URL reads it through ``ktune.db.reader`` (no SQLAlchemy, no numpy), and builds a question
on ktune's operators through their workload forms (no kernel); the device catalog is loaded
only for the similar-device tiers, the cost model only for its tier.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ktune.db.lookup import Admit
from ktune.db.lookup_records import LookupQuery, LookupResult
from ktune.db.reader import LogReader, LookupLog, open_read_only
from ktune.db.urls import default_plain, raw_url
from ktune.tuner.lookup.answer import Answer
from ktune.tuner.lookup.model_tier import model_choice
from ktune.tuner.lookup.query import LookupInputError, Question, ask
from ktune.tuner.lookup.similarity import catalog_knows, device_distance, normalise_name
from ktune.tuner.lookup.trust import admit, default_max_distance, stale_reason, validity

if TYPE_CHECKING:
    from ktune.db.repository import TuningLog

__all__ = ["answer_from", "canonical_device", "lookup", "open_log"]

_NEAR = ("exact", "nearest_shape")


def lookup(
    operator: str | None = None,
    shape: str | Sequence[int] | None = None,
    *,
    device: str,
    dtype: str | None = "",
    layout: str | None = "",
    workload: str | None = None,
    db: TuningLog | LookupLog | str | None = None,
    fallback: bool = True,
    allow_stale: bool = False,
    max_distance: float | None = None,
    misses: list[str] | None = None,
) -> Answer | None:
    """The best known config of a workload on ``device``, or None when no tier has one.

    Ask by ``operator`` + ``shape`` (+ ``dtype``, ``layout``) or by a ``workload`` key; for
    ktune's own operators the workload is built as ``ktune tune --op`` builds it (no dtype:
    the operator's default, float32). The tiers, tried in order: ``exact``;
    ``nearest_shape`` (same operator, dtype, layout and rank on this device);
    ``similar_device`` (this workload on the nearest device of the cost model's catalog);
    ``cost_model`` (a registered model's choice); ``similar_device_nearest_shape`` (both at
    once: the nearest tuned shape on the nearest device that has shapes of this operator).
    ``fallback=False`` asks for an exact answer only. ``db``: an open log, a URL, or None for
    the default log; a URL is opened read-only (nothing is created or migrated) once per
    process.

    Every answer is valid at the asked shape (``ktune.tuner.lookup.trust``: among tuned shapes,
    the nearest one whose config is valid there wins; ``validity`` says whether it could be
    checked) and fresh: a config measured with an older kernel template or toolchain answers
    only with ``allow_stale`` (then ``stale`` says so, and why). ``max_distance`` bounds the
    shape distance of the nearest-shape tiers (None: ``$KTUNE_MAX_DISTANCE``, else
    :data:`~ktune.tuner.lookup.trust.DEFAULT_MAX_DISTANCE`; ``math.inf``: no bound); beyond it
    the device and model tiers may still answer. ``misses``, when given, receives why tuned
    configs were passed over (so a caller can say why nothing answered).

    Raises :class:`LookupInputError` (a ``ValueError``) for a malformed question and
    ``db.DatabaseError`` when the log cannot be read (no such log, an older schema: run
    ``ktune db upgrade``, an unreachable server).
    """
    question = ask(
        operator,
        shape,
        "" if dtype is None else dtype,
        "" if layout is None else layout,
        device,
        workload,
    )
    log = db if db is not None and not isinstance(db, str) else open_log(db)
    return answer_from(
        log,
        question,
        fallback=fallback,
        allow_stale=allow_stale,
        max_distance=max_distance,
        misses=misses,
    )


def answer_from(
    log: TuningLog | LookupLog,
    question: Question,
    *,
    fallback: bool = True,
    allow_stale: bool = False,
    max_distance: float | None = None,
    misses: list[str] | None = None,
) -> Answer | None:
    """The answer to a checked question from ``log`` (see :func:`lookup`)."""
    if max_distance is None:
        try:
            max_distance = default_max_distance()
        except ValueError as exc:
            raise LookupInputError("max_distance", str(exc)) from None
    elif not max_distance >= 0:
        raise LookupInputError("max_distance", f"must be a number >= 0, got {max_distance}")
    rejected: list[str] = []
    query, result = _tiers(
        log, question.query, fallback, admit(allow_stale=False), max_distance, rejected
    )
    stale = None
    if allow_stale and (result is None or result.tier not in _NEAR):
        # nothing fresh near: a stale answer of a nearer tier is better than none
        old_query, old = _tiers(
            log, question.query, fallback, admit(allow_stale=True), max_distance, []
        )
        if old is not None and (result is None or _TIER_ORDER[old.tier] < _TIER_ORDER[result.tier]):
            query, result = old_query, old
            stale = stale_reason(old.tuned)
    notes = tuple(dict.fromkeys(rejected))
    if misses is not None:
        misses.extend(notes)
        if fallback and (result is None or result.tier not in _NEAR):
            misses.append(
                f"no valid{'' if allow_stale else ', fresh'} tuned shape on {query.device!r} "
                f"within distance {max_distance:g} of the asked one (--max-distance)"
            )
    if result is not None and result.tier != "similar_device_nearest_shape":
        return _answer(query, result, stale, notes)
    if result is None:
        _check_known(log, query)
    # Neither this shape nor this device was measured: a model trained on the log ranks this
    # very workload's space for this device; where it cannot (an operator without a space, a
    # device without a spec), the measured nearest shape of the most similar device answers.
    chosen = model_choice(lambda: _full_log(log), query) if fallback else None
    if chosen is None and result is not None:
        return _answer(query, result, stale, notes)
    return None if chosen is None else replace(chosen, notes=notes)


_TIER_ORDER = {
    "exact": 0,
    "nearest_shape": 1,
    "similar_device": 2,
    "similar_device_nearest_shape": 3,
}


def _answer(
    query: LookupQuery, result: LookupResult, stale: str | None, notes: tuple[str, ...]
) -> Answer:
    return Answer.from_result(
        query,
        result,
        validity=validity(result.tuned, query),
        stale_reason=stale,
        notes=notes,
    )


def _tiers(
    log: TuningLog | LookupLog,
    query: LookupQuery,
    fallback: bool,
    rule: Admit,
    max_distance: float,
    rejected: list[str],
) -> tuple[LookupQuery, LookupResult | None]:
    """The log's tiers under ``rule``: the (possibly respelled) query and the result."""
    distance = device_distance if fallback else None
    limit = None if math.isinf(max_distance) else max_distance

    def ask(q: LookupQuery) -> LookupResult | None:
        return log.lookup(
            q,
            fallback=fallback,
            device_distance=distance,
            admit=rule,
            max_distance=limit,
            rejected=rejected,
        )

    result = ask(query)
    # An exact or nearest-shape answer found the device under this very name; only after a
    # miss may another spelling of it be the log's (the hot paths ask nothing more).
    if result is None or result.tier not in _NEAR:
        canonical = canonical_device(log, query.device)
        if canonical != query.device:
            query = replace(query, device=canonical)
            result = ask(query)
    return query, result


def canonical_device(log: TuningLog | LookupLog, name: str) -> str:
    """The log's own spelling of device ``name``: the name itself when the log has it, else
    the one device of the log whose name normalises alike (case, ``-``/``_``/spaces, a
    leading vendor word: ``nvidia rtx a4000`` is ``NVIDIA RTX A4000``), else ``name``."""
    if log.get_device(name) is not None:
        return name
    key = normalise_name(name)
    same = [d.name for d in log.list_devices() if normalise_name(d.name) == key]
    return same[0] if len(same) == 1 else name


def _check_known(log: TuningLog | LookupLog, query: LookupQuery) -> None:
    """After a miss: tell a question the log cannot answer from one it can never answer."""
    ranks = log.operator_ranks(query.operator)
    if ranks and len(query.shape) not in ranks:
        expected = " or ".join(str(r) for r in sorted(ranks))
        raise LookupInputError(
            "shape",
            f"{query.operator} workloads have {expected} dimension(s), "
            f"got {len(query.shape)}: {list(query.shape)}",
        )
    if log.get_device(query.device) is None and not catalog_knows(query.device):
        raise LookupInputError(
            "device", f"unknown device {query.device!r}: not in the tuning log nor the catalog"
        )


def _full_log(log: TuningLog | LookupLog) -> TuningLog:
    """The log as a :class:`db.TuningLog`, which the cost model's training reads."""
    if isinstance(log, LogReader):
        return log.full_log()
    from ktune.db.repository import TuningLog

    assert isinstance(log, TuningLog), f"the cost model reads a TuningLog, not {log!r}"
    return log


_logs: dict[str, LookupLog] = {}
_logs_lock = threading.Lock()


def open_log(url: str | None = None) -> LookupLog:
    """The log at ``url`` (else ``$KTUNE_DATABASE_URL``, else the default log), opened
    read-only once per process: a lookup must not reconnect. A build that looks configs up
    creates, migrates and changes nothing (a log that does not exist is an error that names
    it, not a new empty log)."""
    raw = raw_url(url)
    if raw is None:
        default = default_plain()
        raw = "" if default is None else default.text
    with _logs_lock:
        log = _logs.get(raw)
        if log is None:
            log = _logs[raw] = open_read_only(raw or None)
        return log
