"""What ``ktune best`` writes for a build system: JSON, shell variables, or a C/C++ header.

The header holds ``#define``s of the answer and of every tuned shape of an operator, and a
dispatch function that picks, for any shape, the config tuned for the nearest tuned shape,
by the same distance as the lookup (``db.shape_distance``), so a static build needs no JIT.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Sequence
from typing import Any

from ktune import Answer
from ktune.db import BestRecord

__all__ = ["ENV_NAME", "ENV_PREFIX", "RenderError", "render_env", "render_header", "render_json"]

#: the default prefix of ``--format env``'s variables, and what a prefix may be
ENV_PREFIX = "KTUNE_"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_INT32 = 2**31 - 1
#: macro suffixes the header itself defines: a parameter of that name gets a trailing ``_``
_OWN_MACROS = {"TIER", "RANK", "N_TUNED"}
#: words a struct field cannot be in C (C23) or C++ (C++23, alternative tokens included), and
#: lowercase macros that compilers or the C library predefine: such a field gets a trailing ``_``
_NOT_FIELDS = frozenset(
    [
        "alignas",
        "alignof",
        "and",
        "and_eq",
        "asm",
        "auto",
        "bitand",
        "bitor",
        "bool",
        "break",
        "case",
        "catch",
        "char",
        "char8_t",
        "char16_t",
        "char32_t",
        "class",
        "compl",
        "concept",
        "const",
        "const_cast",
        "consteval",
        "constexpr",
        "constinit",
        "continue",
        "co_await",
        "co_return",
        "co_yield",
        "decltype",
        "default",
        "delete",
        "do",
        "double",
        "dynamic_cast",
        "else",
        "enum",
        "explicit",
        "export",
        "extern",
        "false",
        "float",
        "for",
        "friend",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "mutable",
        "namespace",
        "new",
        "noexcept",
        "not",
        "not_eq",
        "nullptr",
        "operator",
        "or",
        "or_eq",
        "private",
        "protected",
        "public",
        "register",
        "reinterpret_cast",
        "requires",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "static_assert",
        "static_cast",
        "struct",
        "switch",
        "template",
        "this",
        "thread_local",
        "throw",
        "true",
        "try",
        "typedef",
        "typeid",
        "typename",
        "typeof",
        "typeof_unqual",
        "union",
        "unsigned",
        "using",
        "virtual",
        "void",
        "volatile",
        "wchar_t",
        "while",
        "xor",
        "xor_eq",
        "unix",
        "linux",
        "i386",
        "sun",
        "sparc",
        "mips",
        "vax",
        "errno",
        "stdin",
        "stdout",
        "stderr",
    ]
)


class RenderError(ValueError):
    """The configs cannot be written in the asked format (e.g. a value C cannot hold)."""


def render_json(answer: Answer) -> str:
    return json.dumps(answer.to_dict(), indent=1) + "\n"


def _ident(text: str) -> str:
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
        ident = _ident(name)
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


# -- the C header -------------------------------------------------------------------------


def render_header(
    tuned: Sequence[BestRecord],
    *,
    operator: str,
    device: str,
    answer: Answer | None = None,
    dtype: str = "",
    layout: str = "",
    asked_device: str | None = None,
) -> str:
    """A C/C++ (C99 or later) header for ``operator`` over its shapes ``tuned`` on ``device``
    (for ``asked_device`` when that has none and ``device`` is the most similar).

    ``answer``, when given, is also written as plain ``#define``s (the config for the shape
    that was asked). Raises :class:`RenderError` when the tuned configs cannot share one
    C struct (different parameters, a string where a number was, mixed ranks). The header
    names no path or time, so the same log gives the same bytes on any machine.
    """
    if not tuned:
        raise RenderError(f"no tuned shapes of {operator} on {device!r}")
    tuned = sorted(tuned, key=lambda t: t.workload_key)  # the lookup's tie-break order
    ranks = {len(t.shape) for t in tuned}
    if len(ranks) > 1:
        raise RenderError(
            f"{operator} has tuned shapes of ranks {sorted(ranks)}: give --shape to pick one"
        )
    rank = ranks.pop()
    fields = _fields(tuned)
    base = "_".join(_ident(p) for p in (operator, dtype, layout) if p)
    macro, c_name = f"KTUNE_{base}", f"ktune_{base.lower()}"
    struct = f"{c_name}_config"
    n = len(tuned)

    family = operator + (f" ({dtype}" + (f", {layout}" if layout else "") + ")" if dtype else "")
    stand_in = ""
    if asked_device is not None and asked_device != device:
        stand_in = (
            f" * Asked for {_comment(asked_device)}, which has none: "
            f"{_comment(device)} is the most similar device.\n"
        )
    lines = [
        (
            f"/* Tuned configs of {_comment(family)} on {_comment(device)}: {n} tuned shape(s).\n"
            f"{stand_in} * Generated by `ktune best --format header`; do not edit. "
            "Needs C99 or C++."
        ),
        (
            " * Distance between shapes: sum over dimensions of |log2(shape / tuned)|, "
            "as ktune's lookup. */"
        ),
        f"#ifndef {macro}_H_",
        f"#define {macro}_H_",
        "",
        "#include <math.h>",
        "",
    ]
    if answer is not None:
        asked = (
            f"/* Asked: {_comment(answer.query.workload_key)} -> tier {answer.tier} "
            f"(tuned for {_comment(answer.workload)} on {_comment(answer.device)}, "
            f"distance {answer.distance:.3g}) */"
        )
        lines += [asked, f'#define {macro}_TIER "{answer.tier}"']
        lines += [
            f"#define {macro}_{_macro_name(name)} {_c_value(answer.config[name])}"
            for name in answer.config
        ]
        lines.append("")
    lines.append(f"/* Tuned shapes, with the time measured on {_comment(device)}. */")
    for t in tuned:
        tag = "X".join(str(d) for d in t.shape)
        lines.append(f"/* {_comment(t.workload_key)}: {t.time_ms:.6g} ms */")
        lines += [
            f"#define {macro}_{tag}_{_ident(name)} {_c_value(t.config[name])}" for name in fields
        ]
    lines += [
        "",
        f"typedef struct {struct} {{",
        *[f"    {ctype} {_field_name(name)};" for name, ctype in fields.items()],
        f"}} {struct};",
        "",
        f"#define {macro}_RANK {rank}",
        f"#define {macro}_N_TUNED {n}",
        "",
        f"static const long long {c_name}_shapes[{n}][{rank}] = {{",
        *[f"    {{{', '.join(str(d) for d in t.shape)}}}," for t in tuned],
        "};",
        "",
        f"static const {struct} {c_name}_configs[{n}] = {{",
        *[
            f"    {{{', '.join(_c_value(t.config[name]) for name in fields)}}},  "
            f"/* {'x'.join(map(str, t.shape))} */"
            for t in tuned
        ],
        "};",
        "",
        (
            f"/* The config tuned for the shape nearest to `shape` ({rank} sizes); "
            "an exact match wins."
        ),
        " * NULL when a size is not positive. */",
        f"static inline const {struct} *{c_name}_select(const long long *shape)",
        "{",
        "    int best = 0;",
        "    double best_distance = HUGE_VAL;",
        f"    for (int k = 0; k < {macro}_RANK; ++k)",
        "        if (shape[k] <= 0)",
        "            return 0;",
        f"    for (int i = 0; i < {macro}_N_TUNED; ++i) {{",
        "        double distance = 0.0;",
        f"        for (int k = 0; k < {macro}_RANK; ++k)",
        (
            "            distance += fabs(log2((double)shape[k]) - "
            f"log2((double){c_name}_shapes[i][k]));"
        ),
        "        if (distance < best_distance) {",
        "            best_distance = distance;",
        "            best = i;",
        "        }",
        "    }",
        f"    return &{c_name}_configs[best];",
        "}",
        "",
        f"#endif /* {macro}_H_ */",
        "",
    ]
    return "\n".join(lines)


def _fields(tuned: Sequence[BestRecord]) -> dict[str, str]:
    """Parameter name -> C type, the same for every tuned config."""
    names = list(tuned[0].config)
    for t in tuned[1:]:
        if set(t.config) != set(names):
            raise RenderError(
                f"{t.workload_key} has parameters {sorted(t.config)}, {tuned[0].workload_key} "
                f"has {sorted(names)}: they cannot share one C struct"
            )
    fields: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in names:
        ident = _field_name(name)
        if ident in seen:
            raise RenderError(
                f"parameters {seen[ident]!r} and {name!r} both become C field {ident}"
            )
        seen[ident] = name
        fields[name] = _c_type(name, [t.config[name] for t in tuned])
    return fields


def _field_name(name: str) -> str:
    """Parameter ``name`` as a struct field: lowercase, a trailing ``_`` for a keyword or a
    predefined macro (``int`` -> ``int_``, ``unix`` -> ``unix_``)."""
    ident = _ident(name).lower()
    return f"{ident}_" if ident in _NOT_FIELDS else ident


def _macro_name(name: str) -> str:
    """Parameter ``name`` as the tail of the answer's macro (``TIER`` -> ``TIER_``, since the
    header defines ``..._TIER`` itself)."""
    ident = _ident(name)
    return f"{ident}_" if ident in _OWN_MACROS else ident


def _c_type(name: str, values: list[Any]) -> str:
    if all(isinstance(v, str) for v in values):
        return "const char *"
    if any(isinstance(v, str) or not isinstance(v, (int, float)) for v in values):
        raise RenderError(f"parameter {name!r} mixes strings and numbers: {values[:4]}")
    if all(isinstance(v, int) for v in values):  # bool is an int
        return "int" if all(-_INT32 - 1 <= v <= _INT32 for v in values) else "long long"
    return "double"


def _c_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise RenderError(f"{value} has no C literal (beyond the range of long long)")
        if value == -(2**63):  # 9223372036854775808LL itself is out of range
            return "(-9223372036854775807LL - 1)"
        return str(value) if -_INT32 - 1 <= value <= _INT32 else f"{value}LL"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RenderError(f"{value} has no C literal")
        text = repr(value)
        return text if any(c in text for c in ".e") else f"{text}.0"
    if isinstance(value, str):
        return _c_string(value)
    raise RenderError(f"{value!r} has no C literal")


def _c_string(text: str) -> str:
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F and char != "?":  # '?' avoids trigraphs
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _comment(text: str) -> str:
    """``text`` safe inside a C comment, also under ``-Wcomment``: no ``*/``, ``/*`` or line
    break (nor a backslash before one)."""
    return re.sub(r"\s", " ", text).replace("*/", "* /").replace("/*", "/ *")
