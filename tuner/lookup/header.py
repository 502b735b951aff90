"""The C/C++ header ``ktune best --format header`` writes for a build system.

The header holds ``#define``s of the answer and of every tuned shape of an operator, and a
dispatch function that picks, for any shape, the config tuned for the nearest tuned shape,
by the same distance as the lookup (``ktune.db.shape_distance``), so a static build needs no JIT.
:func:`header` chooses what goes in (the device's tuned shapes, else the most similar
device's); :func:`render_header` writes it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ktune.db.lookup_records import BestRecord
from ktune.db.reader import LookupLog
from ktune.search_space.operators.fingerprint import kernel_hash
from ktune.tuner.lookup.answer import Answer
from ktune.tuner.lookup.query import own_family
from ktune.tuner.lookup.render import RenderError
from ktune.tuner.lookup.render import identifier as _ident
from ktune.tuner.lookup.similarity import device_distance
from ktune.tuner.lookup.tiers import canonical_device
from ktune.tuner.lookup.trust import default_max_distance, stale_reason

__all__ = ["NotTuned", "header", "render_header"]

_INT32 = 2**31 - 1
#: macro suffixes the header itself defines: a parameter of that name gets a trailing ``_``
_OWN_MACROS = {"TIER", "RANK", "N_TUNED", "MAX_DISTANCE"}
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


# -- the C header -------------------------------------------------------------------------


class NotTuned(LookupError):
    """The log has no tuned shapes to write a header of."""


def header(
    log: LookupLog,
    *,
    operator: str,
    device: str,
    dtype: str = "",
    layout: str = "",
    answer: Answer | None = None,
    exact: bool = False,
    allow_stale: bool = False,
    max_distance: float | None = None,
) -> str:
    """The header of ``operator``'s tuned shapes on ``device``, with ``answer`` (a lookup's,
    for the shape a build asked about) among its ``#define``s.

    With an answer, the shapes are those of its workload's family and rank on the device that
    answered. Without one, those of (``operator``, ``dtype``, ``layout``) on ``device``; for
    ktune's own operators, blanks take the operator's defaults (as ``ktune tune`` does) when
    the family as given has none; and unless ``exact``, a device without any gets the shapes
    of the most similar device that has some. Configs measured with an older kernel template
    or toolchain are left out unless ``allow_stale``. The dispatch serves a shape only with a
    config whose operator's requirements hold there, within ``max_distance`` (None: the
    lookup's default). Raises :class:`NotTuned` when there are none, :class:`RenderError` when
    they cannot be written.
    """
    asked = canonical_device(log, device)
    if answer is not None:
        q = answer.query
        operator, dtype, layout, tuned_on = q.operator, q.dtype, q.layout, answer.device
        tuned = [
            t
            for t in log.tuned_configs(
                operator=operator, dtype=dtype, layout=layout, device=tuned_on
            )
            if len(t.shape) == len(q.shape)
        ]
    else:
        tuned_on = asked
        tuned = log.tuned_configs(operator=operator, dtype=dtype, layout=layout, device=asked)
        family = None if tuned else own_family(operator, dtype, layout)
        if family is not None and family != (dtype, layout):
            dtype, layout = family
            tuned = log.tuned_configs(operator=operator, dtype=dtype, layout=layout, device=asked)
        if not tuned and not exact:
            near = log.similar_devices(asked, operator, dtype, layout, device_distance)
            if near:
                tuned_on = near[0][1]
                tuned = log.tuned_configs(
                    operator=operator, dtype=dtype, layout=layout, device=tuned_on
                )
    if not tuned:
        raise NotTuned(f"no tuned shapes of {operator} on {device!r}")
    fresh = [t for t in tuned if allow_stale or stale_reason(t) is None]
    if not fresh:
        raise NotTuned(
            f"every tuned shape of {operator} on {tuned_on!r} is stale "
            f"({stale_reason(tuned[0])}): --allow-stale accepts them"
        )
    return render_header(
        fresh,
        operator=operator,
        device=tuned_on,
        asked_device=asked,
        answer=answer,
        dtype=dtype,
        layout=layout,
        max_distance=default_max_distance() if max_distance is None else max_distance,
    )


def render_header(
    tuned: Sequence[BestRecord],
    *,
    operator: str,
    device: str,
    answer: Answer | None = None,
    dtype: str = "",
    layout: str = "",
    asked_device: str | None = None,
    max_distance: float = math.inf,
) -> str:
    """A C/C++ (C99 or later) header for ``operator`` over its shapes ``tuned`` on ``device``
    (for ``asked_device`` when that has none and ``device`` is the most similar).

    ``answer``, when given, is also written as plain ``#define``s (the config for the shape
    that was asked). Raises :class:`RenderError` when the tuned configs cannot share one
    C struct (different parameters, a string where a number was, mixed ranks). The header
    names no path or time, so the same log gives the same bytes on any machine. Its dispatch
    skips a config whose operator's requirements fail at the called shape (ktune's operators)
    and tuned shapes farther than ``max_distance``.
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
    valid_code, valid_note = _validity_code(tuned, operator, c_name, rank)
    limit = _c_value(float(max_distance)) if math.isfinite(max_distance) else "HUGE_VAL"

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
        "#include <stdint.h>",
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
    idents = [_ident(name) for name in fields]
    values = [[_c_value(t.config[name]) for name in fields] for t in tuned]
    for t, literals in zip(tuned, values):
        tag = "X".join(str(d) for d in t.shape)
        lines.append(f"/* {_comment(t.workload_key)}: {t.time_ms:.6g} ms */")
        lines += [f"#define {macro}_{tag}_{i} {v}" for i, v in zip(idents, literals)]
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
            f"    {{{', '.join(literals)}}},  /* {'x'.join(map(str, t.shape))} */"
            for t, literals in zip(tuned, values)
        ],
        "};",
        "",
        *valid_code,
        (
            f"/* The config tuned for the shape nearest to `shape` ({rank} sizes); "
            f"an exact match wins; {valid_note}."
        ),
        (
            " * NULL when a size is not positive, or no valid config is tuned within distance "
            f"{macro}_MAX_DISTANCE. */"
        ),
        f"#define {macro}_MAX_DISTANCE {limit}",
        f"static inline const {struct} *{c_name}_select(const long long *shape)",
        "{",
        "    int best = -1;",
        f"    double best_distance = {macro}_MAX_DISTANCE;",
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
        (
            "        if (distance <= best_distance && (best < 0 || distance < best_distance)"
            + (f" && {c_name}_valid(i, shape)" if valid_code else "")
            + ") {"
        ),
        "            best_distance = distance;",
        "            best = i;",
        "        }",
        "    }",
        "    return best < 0 ? 0 : &" + c_name + "_configs[best];",
        "}",
        "",
        f"#endif /* {macro}_H_ */",
        "",
    ]
    return "\n".join(lines)


def _validity_code(
    tuned: Sequence[BestRecord], operator: str, c_name: str, rank: int
) -> tuple[list[str], str]:
    """The C of ``{c_name}_valid(i, shape)`` (whether tuned config ``i`` meets its operator's
    requirements at ``shape``) and what the header's comment says of it; no code where the
    operator has no requirements, or where they cannot be written over the shape."""
    if kernel_hash(operator) is None:
        return [], "validity at other shapes unchecked: the log knows no rule of this operator"
    from ktune.search_space.operators.expressions import C_HELPERS, int_expr
    from ktune.search_space.operators.forms import OperatorError, form
    from ktune.search_space.workload import Workload

    own = form(operator)  # its form: the entry point and requirements, without numpy
    if own is None or not own.requirements:
        return [], "every config is valid at every shape"
    requirements = own.requirements
    entry = own.entry
    if len(entry.sizes) != rank or any(
        tuple(own.entry_sizes(Workload.from_key(t.workload_key))) != tuple(t.shape) for t in tuned
    ):
        return [], "validity at other shapes unchecked: sizes unlike the shape"
    names = [*entry.sizes, *(d for d, _ in entry.derived)]
    unpack = [f"    const int64_t {n} = (int64_t)shape[{i}];" for i, n in enumerate(entry.sizes)]
    unpack += [
        f"    const int64_t {d} = {int_expr(e).c({}, set(names))};" for d, e in entry.derived
    ]
    cases = []
    for i, t in enumerate(tuned):
        try:
            terms = [f"({int_expr(r).c(t.config, set(names))} != 0)" for r in requirements]
            cond = " && ".join(terms)
        except (OperatorError, ValueError, TypeError):
            cond = "1"  # not the operator's knobs: no rule to apply
        cases.append(f"    case {i}: return {cond};")
    code = [
        "#ifndef KTUNE_KT_HELPERS_",
        "#define KTUNE_KT_HELPERS_",
        C_HELPERS.rstrip(),
        "#endif",
        "",
        (
            f"/* Whether tuned config i meets {_comment(operator)}'s requirements at `shape`: "
            f"{_comment(' and '.join(requirements))}. */"
        ),
        f"static inline int {c_name}_valid(int i, const long long *shape)",
        "{",
        *unpack,
        *[f"    (void){n};" for n in names],
        "    switch (i) {",
        *cases,
        "    default: return 0;",
        "    }",
        "}",
        "",
    ]
    return code, "a config is served only where its requirements hold"


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
    if not text.isprintable():  # every whitespace but the space is unprintable
        text = re.sub(r"\s", " ", text)
    return text.replace("*/", "* /").replace("/*", "/ *")
