"""A kernel's CUDA source made compilable by g++ against the emulation header.

Only what C++ cannot express changes, each by a fixed rule, so the code path the compiler sees
is the one NVRTC compiles for the GPU:

- each inline PTX statement (``asm volatile("..." : outputs : inputs)``) becomes one call into
  ``kt::ptx`` (``runtime/kt_cuda.h``) with the statement's operands in the instruction's order;
  an instruction the emulation does not know is a :class:`TranslationError` naming it;
- ``extern __shared__ T name[];`` becomes a pointer to the launch's dynamic shared memory;
- ``#include`` lines of CUDA's own headers are dropped (the emulation header provides them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TranslationError", "translate"]


class TranslationError(ValueError):
    """The source uses something the emulation cannot run (an unknown PTX instruction)."""


_CUDA_HEADERS = re.compile(
    r"^\s*#\s*include\s*[<\"](cuda_runtime|cuda_fp16|cuda|cuda_runtime_api|device_launch_parameters"
    r"|mma|cuda_pipeline|cooperative_groups)(\.h|\.hpp)?[>\"].*$",
    re.MULTILINE,
)
_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+((?:__attribute__\s*\(\(.*?\)\)\s*|__align__\s*\(\s*\d+\s*\)\s*)*)"
    r"([A-Za-z_][\w:<>, ]*?[\w>])\s*(\*?)\s*([A-Za-z_]\w*)\s*\[\s*\]\s*;"
)
_ASM = re.compile(r"\b(?:asm|__asm__)\s*(?:volatile|__volatile__)?\s*\(")


@dataclass(frozen=True)
class _Operand:
    constraint: str
    expr: str


def translate(code: str) -> str:
    """``code`` with its inline PTX, dynamic shared memory and CUDA includes rewritten."""
    code = _CUDA_HEADERS.sub("", code)
    code = _EXTERN_SHARED.sub(_dynamic_shared, code)
    out: list[str] = []
    pos = 0
    for match in _ASM.finditer(code):
        if match.start() < pos:
            continue
        end = _closing(code, match.end() - 1)
        body = code[match.end() : end]
        out.append(code[pos : match.start()])
        out.append(_asm_call(body))
        pos = end + 1
    out.append(code[pos:])
    return "".join(out)


def _dynamic_shared(m: re.Match[str]) -> str:
    elem = m.group(2).strip() + (m.group(3) or "")
    return f"{elem}* const {m.group(4)} = static_cast<{elem}*>(kt::dynamic_shared());"


def _closing(code: str, open_at: int) -> int:
    """Index of the parenthesis that closes the one at ``open_at`` (strings skipped)."""
    depth, i = 0, open_at
    while i < len(code):
        c = code[i]
        if c == '"':
            i = _string_end(code, i)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise TranslationError("an asm statement has no closing parenthesis")


def _string_end(code: str, start: int) -> int:
    i = start + 1
    while code[i] != '"':
        i += 2 if code[i] == "\\" else 1
    return i


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside strings, parentheses and brackets."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c == '"':
            j = _string_end(text, i)
            cur.append(text[i : j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _asm_call(body: str) -> str:
    sections = _split_top(body, ":")
    template = "".join(
        bytes(s, "utf-8").decode("unicode_escape")
        for s in re.findall(r'"((?:[^"\\]|\\.)*)"', sections[0])
    )
    operands: list[_Operand] = []
    for section in sections[1:3]:
        for item in _split_top(section, ","):
            item = item.strip()
            if not item:
                continue
            m = re.fullmatch(r'"([^"]*)"\s*\((.*)\)', item, re.DOTALL)
            if not m:
                raise TranslationError(f"cannot read the asm operand {item!r}")
            operands.append(_Operand(m.group(1), m.group(2).strip()))
    text = " ".join(template.replace("\n", " ").replace("\t", " ").split())
    for pattern, emit in _RULES:
        m = re.fullmatch(pattern, text)
        if m:
            return emit(m, [f"({o.expr})" for o in operands])
    raise TranslationError(f"the emulation has no rule for the inline PTX {text!r}")


def _ref(token: str, ops: list[str]) -> str:
    """An instruction operand as C++: ``%N`` is operand N, a literal stays itself."""
    token = token.strip().strip("[]").strip()
    m = re.fullmatch(r"%(\d+)", token)
    if m:
        return ops[int(m.group(1))]
    if re.fullmatch(r"-?\d+", token):
        return token
    raise TranslationError(f"inline PTX operand {token!r} is neither %N nor a number")


def _regs(group: str, ops: list[str]) -> list[str]:
    return [_ref(t, ops) for t in group.strip("{} ").split(",")]


_Emit = Callable[[re.Match[str], list[str]], str]


def _cp_async(m: re.Match[str], ops: list[str]) -> str:
    src_size = _ref(m.group(4), ops) if m.group(4) else m.group(3)
    return (
        f"kt::ptx::cp_async({_ref(m.group(1), ops)}, {_ref(m.group(2), ops)}, "
        f"{m.group(3)}, {src_size})"
    )


def _ldmatrix(m: re.Match[str], ops: list[str]) -> str:
    regs = _regs(m.group(3), ops)
    trans = "true" if m.group(2) else "false"
    return f"kt::ptx::ldmatrix_x{m.group(1)}({trans}, {_ref(m.group(4), ops)}, {', '.join(regs)})"


def _mma(m: re.Match[str], ops: list[str]) -> str:
    regs = [r for g in m.groups() for r in _regs(g, ops)]
    return f"kt::ptx::mma_m16n8k16_f32({', '.join(regs)})"


_R = r"(%\d+|-?\d+)"
_G = r"(\{[^}]*\})"
_RULES: list[tuple[str, _Emit]] = [
    (
        rf"cvt\.f32\.f16 {_R}, {_R};?",
        lambda m, o: f"kt::ptx::cvt_f32_f16({_ref(m[1], o)}, {_ref(m[2], o)})",
    ),
    (
        rf"cvt\.rn\.f16\.f32 {_R}, {_R};?",
        lambda m, o: f"kt::ptx::cvt_rn_f16_f32({_ref(m[1], o)}, {_ref(m[2], o)})",
    ),
    (  # a 32-bit shared address through a 64-bit temporary
        (
            rf"\{{ ?\.reg \.u64 (\w+); ?cvta\.to\.shared\.u64 \1, {_R}; "
            rf"?cvt\.u32\.u64 {_R}, \1; ?\}};?"
        ),
        lambda m, o: f"kt::ptx::cvta_to_shared({_ref(m[3], o)}, {_ref(m[2], o)})",
    ),
    (
        rf"cvta\.to\.shared\.u(?:32|64) {_R}, {_R};?",
        lambda m, o: f"kt::ptx::cvta_to_shared({_ref(m[1], o)}, {_ref(m[2], o)})",
    ),
    (
        (
            rf"cp\.async\.c[ag]\.shared(?:::cta)?\.global(?:\.L2::\d+B)? \[{_R}\], \[{_R}\], "
            rf"(\d+)(?:, {_R})?;?"
        ),
        _cp_async,
    ),
    (r"cp\.async\.commit_group;?", lambda m, o: "kt::ptx::cp_async_commit()"),
    (rf"cp\.async\.wait_group {_R};?", lambda m, o: f"kt::ptx::cp_async_wait({_ref(m[1], o)})"),
    (
        r"cp\.async\.wait_all;?",
        lambda m, o: "(kt::ptx::cp_async_commit(), kt::ptx::cp_async_wait(0))",
    ),
    (
        (
            rf"ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared(?:::cta)?\.b16 {_G}, "
            rf"\[{_R}\];?"
        ),
        _ldmatrix,
    ),
    (
        rf"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32 {_G}, {_G}, {_G}, {_G};?",
        _mma,
    ),
]
