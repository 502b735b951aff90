"""The C of a shipped library's entry points: argument checks and a dispatch decided at build time.

For each entry point (an operator, dtype and layout) the build knows its variants (one compiled
function per distinct tuned config, plus a default config valid at every shape) and the tuned
shapes each variant won. A call runs the variant of the nearest tuned shape (distance: the sum
over sizes of the squared difference of ``log(size + 1)``) whose requirements hold at the called
sizes, else the default. The choice of the last shape a thread called is remembered, so a loop
over one shape pays for it once. Invalid arguments return :data:`INVALID_ARGUMENT` before
anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ktune.search_space.operators.entry import EntryAbi
from ktune.search_space.operators.expressions import C_HELPERS, int_expr
from ktune.search_space.parameters import Config

__all__ = ["INVALID_ARGUMENT", "Entry", "VariantFn", "dispatch_source", "prototype"]

#: what an entry point returns for a null pointer or sizes outside its domain
INVALID_ARGUMENT = -1


@dataclass(frozen=True)
class VariantFn:
    """One compiled variant: its C symbol, its config and the requirements it must meet."""

    symbol: str
    config: Config
    requirements: tuple[str, ...] = ()


@dataclass(frozen=True)
class Entry:
    """One public entry point: its name, ABI and C element type (``None``: ``void``, as for
    fp16 on a GPU), whether it takes a stream first (GPU), its variants, the tuned shapes
    (entry sizes) with the index of the variant each one won, and the default variant's index."""

    name: str
    abi: EntryAbi
    element: str | None
    gpu: bool
    variants: tuple[VariantFn, ...]
    tuned: tuple[tuple[tuple[int, ...], int], ...]
    default: int


def prototype(entry: Entry, name: str | None = None) -> str:
    """The C declaration (without ``;``) of ``entry``'s function, or of a variant ``name``."""
    element = entry.element or "void"
    params = ["cudaStream_t stream"] if entry.gpu else []
    params += [f"int64_t {s}" for s in entry.abi.sizes]
    for p in entry.abi.pointers:
        params.append(f"{'' if p.output else 'const '}{element} *{p.name}")
    return f"int {name or entry.name}({', '.join(params)})"


def _conjunction(expressions: Sequence[str], names: Sequence[str], config: Config) -> str:
    """The expressions as one C condition over ``names``, ``config``'s knobs folded in."""
    terms = [f"({int_expr(e).c(config, set(names))} != 0)" for e in expressions]
    return " && ".join(terms) if terms else "1"


def _entry_code(entry: Entry) -> str:
    abi, name = entry.abi, entry.name
    names = [*abi.sizes, *(d for d, _ in abi.derived)]
    rank = len(abi.sizes)
    sizes_only = "".join(f"    const int64_t {s} = s[{i}];\n" for i, s in enumerate(abi.sizes))
    unpack = sizes_only + "".join(
        f"    const int64_t {d} = {int_expr(expr).c({}, set(names))};\n" for d, expr in abi.derived
    )
    unused = "".join(f"    (void){n};\n" for n in names)
    unused_sizes = "".join(f"    (void){n};\n" for n in abi.sizes)
    cases = "".join(
        f"    case {i}: return {_conjunction(v.requirements, names, v.config)};\n"
        for i, v in enumerate(entry.variants)
    )
    checks = abi.valid_sizes()
    sizes_domain = _conjunction(checks[: len(abi.sizes)], abi.sizes, {})
    derived_domain = _conjunction(checks[len(abi.sizes) :], names, {})
    shapes = ", ".join(
        "{" + ", ".join(f"INT64_C({v})" for v in sizes) + "}" for sizes, _ in entry.tuned
    )
    winners = ", ".join(str(v) for _, v in entry.tuned)
    count = len(entry.tuned)
    lines = [
        f"/* {name}: {len(entry.variants)} variants, {count} tuned shapes */",
        f"static int {name}_valid(int variant, const int64_t *s)",
        "{",
        unpack + unused + "    switch (variant) {",
        cases + "    default: return 0;\n    }\n}\n",
        (
            f"static int {name}_domain(const int64_t *s)\n{{\n{sizes_only}{unused_sizes}"
            f"    if (!({sizes_domain}))\n        return 0;\n    {{\n{unpack}{unused}"
            f"    return {derived_domain};\n    }}\n}}\n"
        ),
    ]
    if count:
        lines.append(f"static const int64_t {name}_shapes[{count}][{rank}] = {{{shapes}}};")
        lines.append(f"static const int {name}_winner[{count}] = {{{winners}}};")
    lines.append(
        f"""
int {name}_variant(const int64_t *s)
{{
    static _Thread_local int64_t last[{rank}];
    static _Thread_local int last_pick = -1;
    if (last_pick >= 0 && memcmp(last, s, sizeof last) == 0)
        return last_pick;
    int pick = {entry.default};"""
    )
    if count:
        lines.append(
            f"""    double nearest = HUGE_VAL;
    for (int i = 0; i < {count}; i++) {{
        double d = 0;
        for (int j = 0; j < {rank}; j++) {{
            const double t = log((double){name}_shapes[i][j] + 1.0) - log((double)s[j] + 1.0);
            d += t * t;
        }}
        if (d < nearest && {name}_valid({name}_winner[i], s)) {{
            nearest = d;
            pick = {name}_winner[i];
        }}
    }}"""
        )
    lines.append(
        """    memcpy(last, s, sizeof last);
    last_pick = pick;
    return pick;
}
"""
    )
    args = ", ".join(
        (["stream"] if entry.gpu else []) + list(abi.sizes) + [p.name for p in abi.pointers]
    )
    null_check = " || ".join(f"{p.name} == NULL" for p in abi.pointers) or "0"
    calls = "".join(
        f"    case {i}: return {v.symbol}({args});\n" for i, v in enumerate(entry.variants)
    )
    sizes = ", ".join(abi.sizes)
    lines.append(
        f"""{prototype(entry)}
{{
    const int64_t s[{rank}] = {{{sizes}}};
    if ({null_check} || !{name}_domain(s))
        return KTUNE_INVALID_ARGUMENT;
    switch ({name}_variant(s)) {{
{calls}    default: return KTUNE_INVALID_ARGUMENT;
    }}
}}
"""
    )
    return "\n".join(lines)


def dispatch_source(entries: Sequence[Entry], header: str) -> str:
    """The C11 file of every entry point: the variants' declarations and each dispatch."""
    out = [
        "/* Generated by ktune build: the entry points and their build-time dispatch. */",
        "#include <math.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <string.h>",
        f'#include "{header}"',
        C_HELPERS,
    ]
    for entry in entries:
        out.extend(f"{prototype(entry, v.symbol)};" for v in entry.variants)
    out.append("")
    out.extend(_entry_code(entry) for entry in entries)
    return "\n".join(out)
