"""The build-time lookup: questions, tiers, answers, and what a build reads of them.

One family of modules serves ``ktune.lookup``, ``ktune best`` (JSON, env, C header) and
``GET /v1/best``, so they give the same answers:

- ``query``: a question checked and built into its workload (:class:`LookupInputError`);
- ``tiers``: :func:`lookup` and :func:`answer_from` (the log's tiers, other spellings of a device,
  the cost model), :func:`open_log` (a log opened read-only once per process);
- ``answer``: :class:`Answer`, the JSON document of ``GET /v1/best``;
- ``model_tier`` / ``cost_model_tier``: the registered cost-model choice (the last tier);
- ``similarity``: device distances from the cost model's catalog (the similar-device tiers);
- ``render`` / ``header``: JSON, shell variables, and the C/C++ header with its dispatch
  function.

The SQL is ``db``'s (``ktune.db.lookup``, run by ``ktune.db.reader`` or ``ktune.db.TuningLog``).
The names below are imported on first use, and none of the modules loads SQLAlchemy or
numpy: each is loaded by the first question that needs it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktune.tuner.lookup.answer import Answer, utc_timestamp
    from ktune.tuner.lookup.header import NotTuned, header, render_header
    from ktune.tuner.lookup.model_tier import ModelChoice, register_model_choice
    from ktune.tuner.lookup.query import LookupInputError, parse_shape
    from ktune.tuner.lookup.render import ENV_NAME, ENV_PREFIX, RenderError, render_env, render_json
    from ktune.tuner.lookup.tiers import answer_from, canonical_device, lookup, open_log

__all__ = [
    "ENV_NAME",
    "ENV_PREFIX",
    "Answer",
    "LookupInputError",
    "ModelChoice",
    "NotTuned",
    "RenderError",
    "answer_from",
    "canonical_device",
    "header",
    "lookup",
    "open_log",
    "parse_shape",
    "register_model_choice",
    "render_env",
    "render_header",
    "render_json",
    "utc_timestamp",
]

_MODULES = {
    "Answer": "answer",
    "utc_timestamp": "answer",
    "NotTuned": "header",
    "header": "header",
    "render_header": "header",
    "ModelChoice": "model_tier",
    "register_model_choice": "model_tier",
    "LookupInputError": "query",
    "parse_shape": "query",
    "ENV_NAME": "render",
    "ENV_PREFIX": "render",
    "RenderError": "render",
    "render_env": "render",
    "render_json": "render",
    "answer_from": "tiers",
    "canonical_device": "tiers",
    "lookup": "tiers",
    "open_log": "tiers",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"ktune.tuner.lookup.{module}"), name)
    globals()[name] = value
    return value
