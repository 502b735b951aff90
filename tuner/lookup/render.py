"""What ``ktune best`` writes for a build system: JSON and shell variables (the C/C++ header
is ``header``)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ktune.tuner.lookup.answer import Answer

__all__ = ["ENV_NAME", "ENV_PREFIX", "RenderError", "identifier", "render_env", "render_json"]

#: the default prefix of ``--format env``'s variables, and what a prefix may be
ENV_PREFIX = "KTUNE_"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RenderError(ValueError):
    """The configs cannot be written in the asked format (e.g. a value C cannot hold)."""


def render_json(answer: Answer) -> str:
    return json.dumps(answer.to_dict(), indent=1) + "\n"


def identifier(text: str) -> str:
    """``text`` as the tail of a C or shell identifier: A-Z, 0-9 and ``_``."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()
    return name if name and not name[0].isdigit() else f"_{name}"


def render_env(answer: Answer, prefix: str = ENV_PREFIX) -> str:
    """``NAME=value`` lines, shell-quoted, for ``eval "$(ktune best ... --format env)"``; a
    parameter named like one of the answer's own variables gets a trailing ``_``. ``JOB`` and
    ``TRIAL`` are empty for a model's choice; ``TUNING`` is 1 while a job of the workload on the
    device is still queued or running (the answer may change), else 0."""
    meta = {
        "TIER": answer.tier,
        "WORKLOAD": answer.workload,
        "DEVICE": answer.device,
        "TIME_MS": "" if answer.time_ms is None else repr(answer.time_ms),
        "DISTANCE": repr(answer.distance),
        "JOB": "" if answer.job is None else str(answer.job),
        "TRIAL": "" if answer.trial is None else str(answer.trial),
        "TUNING": "1" if answer.tuning else "0",
    }
    lines = {f"{prefix}{key}": value for key, value in meta.items()}
    for name, value in answer.config.items():
        ident = identifier(name)
        var = f"{prefix}{ident}_" if ident in meta else f"{prefix}{ident}"  # tier -> KTUNE_TIER_
        if var in lines:
            raise RenderError(f"parameter {name!r} would overwrite {var}; use --format json")
        lines[var] = _shell_value(value)
    return "".join(f"{var}={shlex.quote(value)}\n" for var, value in lines.items())


def _shell_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)
