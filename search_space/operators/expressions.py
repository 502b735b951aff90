"""Integer expressions over an operator's sizes and knobs, evaluated in Python or written as C.

The launch geometry of a shipped kernel (grid, block, shared memory), an entry point's derived
sizes and the checks of a launcher are one text each, in the constraint language's integer
subset: ints and names, ``+ - * // %``, unary ``-``, comparisons (chains too), ``and``, ``or``,
``not``, ``a if c else b``, ``min`` and ``max``. :meth:`IntExpr.value` evaluates it exactly
(Python ints); :meth:`IntExpr.c` writes it as a C expression over ``int64_t`` variables, with
``//`` and ``%`` as floor division and modulo (Python's rounding, not C's truncation), so the
tuner and the compiled launcher compute the same numbers from one text.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from ktune.search_space.operators.forms import OperatorError

__all__ = ["C_HELPERS", "IntExpr", "int_expr"]

#: C definitions :meth:`IntExpr.c` output relies on (static inline, so every unit may hold them)
C_HELPERS = """\
static inline int64_t kt_floordiv(int64_t a, int64_t b) {
    if (b == 0) return 0; /* never reached on checked sizes: no division trap either way */
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kt_mod(int64_t a, int64_t b) { return a - kt_floordiv(a, b) * b; }
static inline int64_t kt_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kt_max(int64_t a, int64_t b) { return a > b ? a : b; }
"""

_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True)
class IntExpr:
    """A parsed integer expression; ``names`` are the names it reads."""

    text: str
    tree: ast.expr = field(repr=False, compare=False)
    names: frozenset[str] = frozenset()

    def value(self, env: Mapping[str, object]) -> int:
        """The exact value with ``env``'s numbers for the names (booleans as 0 or 1)."""
        return int(_eval(self.tree, env, self.text))

    def c(self, literals: Mapping[str, object], variables: frozenset[str] | set[str]) -> str:
        """C text: names in ``literals`` become their (integer) values, names in ``variables``
        stay names (``int64_t`` in the generated code); any other name is an error."""
        return _c(self.tree, literals, frozenset(variables), self.text)


@cache
def int_expr(text: str) -> IntExpr:
    """Parse ``text``; an :class:`OperatorError` names what is not allowed."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise OperatorError(f"expression {text!r}: {exc.msg}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in ("min", "max")):
                raise OperatorError(f"expression {text!r}: only min() and max() may be called")
            if len(node.args) < 2 or node.keywords:
                raise OperatorError(f"expression {text!r}: min/max take two or more arguments")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BIN and not isinstance(node.op, (ast.FloorDiv, ast.Mod)):
                raise OperatorError(f"expression {text!r}: operator not allowed")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int):
                raise OperatorError(f"expression {text!r}: only integer literals are allowed")
        elif not isinstance(
            node,
            (
                ast.UnaryOp,
                ast.BoolOp,
                ast.Compare,
                ast.IfExp,
                ast.Load,
                ast.operator,
                ast.unaryop,
                ast.boolop,
                ast.cmpop,
            ),
        ):
            raise OperatorError(f"expression {text!r}: {type(node).__name__} not allowed")
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.Not)):
            raise OperatorError(f"expression {text!r}: unary operator not allowed")
        if isinstance(node, ast.Compare) and any(type(o) not in _CMP for o in node.ops):
            raise OperatorError(f"expression {text!r}: comparison not allowed")
    names -= {"min", "max"}
    return IntExpr(text, tree, frozenset(names))


def _literal(node: ast.Constant) -> int:
    value = node.value
    assert isinstance(value, int)  # int_expr admits no other literal
    return value


def _eval(node: ast.expr, env: Mapping[str, object], text: str) -> int:
    if isinstance(node, ast.Constant):
        return _literal(node)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise OperatorError(f"expression {text!r}: no value for {node.id!r}")
        value = env[node.id]
        if not isinstance(value, (int, bool)) and not hasattr(value, "__index__"):
            raise OperatorError(f"expression {text!r}: {node.id!r} is not an integer")
        return int(value)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            if b == 0:
                raise OperatorError(f"expression {text!r}: division by zero")
            return a // b if isinstance(node.op, ast.FloorDiv) else a % b
        return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, text)
        return -v if isinstance(node.op, ast.USub) else int(not v)
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return int(all(_eval(v, env, text) for v in node.values))
        return int(any(_eval(v, env, text) for v in node.values))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env, text)
            ok = {
                ast.Eq: left == right,
                ast.NotEq: left != right,
                ast.Lt: left < right,
                ast.LtE: left <= right,
                ast.Gt: left > right,
                ast.GtE: left >= right,
            }[type(op)]
            if not ok:
                return 0
            left = right
        return 1
    if isinstance(node, ast.IfExp):
        pick = node.body if _eval(node.test, env, text) else node.orelse
        return _eval(pick, env, text)
    if isinstance(node, ast.Call):
        values = [_eval(a, env, text) for a in node.args]
        return min(values) if node.func.id == "min" else max(values)  # type: ignore[attr-defined]
    raise OperatorError(f"expression {text!r}: cannot evaluate {type(node).__name__}")


def _c(node: ast.expr, literals: Mapping[str, object], variables: frozenset[str], text: str) -> str:
    def sub(n: ast.expr) -> str:
        return _c(n, literals, variables, text)

    if isinstance(node, ast.Constant):
        return f"INT64_C({_literal(node)})"
    if isinstance(node, ast.Name):
        if node.id in literals:
            return f"INT64_C({int(literals[node.id])})"  # type: ignore[call-overload]
        if node.id in variables:
            return node.id
        raise OperatorError(f"expression {text!r}: {node.id!r} is neither a knob nor a size")
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.FloorDiv):
            return f"kt_floordiv({sub(node.left)}, {sub(node.right)})"
        if isinstance(node.op, ast.Mod):
            return f"kt_mod({sub(node.left)}, {sub(node.right)})"
        return f"({sub(node.left)} {_BIN[type(node.op)]} {sub(node.right)})"
    if isinstance(node, ast.UnaryOp):
        sign = "-" if isinstance(node.op, ast.USub) else "!"
        return f"({sign}{sub(node.operand)})"
    if isinstance(node, ast.BoolOp):
        op = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + op.join(f"({sub(v)} != 0)" for v in node.values) + ")"
    if isinstance(node, ast.Compare):
        terms, left = [], node.left
        for cmp, right in zip(node.ops, node.comparators):
            terms.append(f"({sub(left)} {_CMP[type(cmp)]} {sub(right)})")
            left = right
        return "(" + " && ".join(terms) + ")"
    if isinstance(node, ast.IfExp):
        return f"(({sub(node.test)}) ? {sub(node.body)} : {sub(node.orelse)})"
    if isinstance(node, ast.Call):
        fn = "kt_min" if node.func.id == "min" else "kt_max"  # type: ignore[attr-defined]
        out = sub(node.args[0])
        for arg in node.args[1:]:
            out = f"{fn}({out}, {sub(arg)})"
        return out
    raise OperatorError(f"expression {text!r}: cannot write {type(node).__name__} as C")
