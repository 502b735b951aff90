"""Constraint-language expressions as C, for a dispatch that checks a config at run time.

A requirement such as ``K % vector_width == 0`` holds or not depending on the called sizes.
:func:`to_c` translates it for one config: the config's knobs are folded in as constants, the
entry point's sizes stay ``int64_t`` variables, and what depends on knobs alone is evaluated
here (so string knobs and ``**`` are fine there). The text is parsed with :mod:`ast`, never
evaluated by Python; only the constraint language's constructs are accepted.

Semantics on sizes follow Python's for the values a dispatch sees: ``//`` and ``%`` floor as
Python does (``kt_floordiv``/``kt_mod`` in :data:`C_HELPERS`), ``/`` is a double division, and
a division by zero makes the expression false, as a constraint that raises does not hold.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ktune.search_space.parameters import Value

__all__ = ["C_HELPERS", "CExprError", "evaluate", "to_c"]

#: C definitions the translated expressions use (emitted once per generated file)
C_HELPERS = r"""
static _Thread_local int kt_zero_division;
static inline int64_t kt_floordiv(int64_t a, int64_t b) {
    if (b == 0) { kt_zero_division = 1; return 0; }
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kt_mod(int64_t a, int64_t b) {
    if (b == 0) { kt_zero_division = 1; return 0; }
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline double kt_div(double a, double b) {
    if (b == 0) { kt_zero_division = 1; return 0; }
    return a / b;
}
static inline int64_t kt_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kt_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t kt_abs64(int64_t a) { return a < 0 ? -a : a; }
"""


class CExprError(ValueError):
    """An expression that cannot be checked at run time in C."""


_FOLD: dict[type[ast.AST], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_C_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_C_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


class _Const:
    """A value known at build time."""

    def __init__(self, value: Any) -> None:
        self.value = value


def to_c(expression: str, sizes: Collection[str], config: Mapping[str, Value]) -> str:
    """``expression`` as a C expression over the ``int64_t`` variables ``sizes``, with the
    knobs of ``config`` folded in; a :class:`CExprError` for what C cannot express."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CExprError(f"{expression!r}: {exc.msg}") from None
    result = _Translator(expression, frozenset(sizes), config).visit(tree.body)
    if isinstance(result, _Const):
        return "1" if _truth(result.value, expression) else "0"
    return f"({result})"


def evaluate(expression: str, values: Mapping[str, Value]) -> Value:
    """``expression`` evaluated on ``values`` (by the same folding, no ``eval``), e.g. a
    convolution's output height from its sizes; a :class:`CExprError` when it cannot be."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CExprError(f"{expression!r}: {exc.msg}") from None
    result = _Translator(expression, frozenset(), values).visit(tree.body)
    if not isinstance(result, _Const):  # pragma: no cover - no sizes were left symbolic
        raise CExprError(f"{expression!r}: not a constant")
    value: Value = result.value
    return value


def _truth(value: Any, expression: str) -> bool:
    if isinstance(value, (bool, int, float, str)):
        return bool(value)
    raise CExprError(f"{expression!r}: cannot take the truth of {value!r}")


def _literal(value: Any, expression: str) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise CExprError(f"{expression!r}: {value} does not fit in int64")
        return f"INT64_C({value})"
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise CExprError(f"{expression!r}: {value!r} cannot be compared with a size in C")


class _Translator:
    def __init__(self, expression: str, sizes: frozenset[str], config: Mapping[str, Value]):
        self.expression = expression
        self.sizes = sizes
        self.config = config

    def fail(self, problem: str) -> CExprError:
        return CExprError(f"{self.expression!r}: {problem}")

    def c(self, node: ast.AST) -> str:
        """A node as C text (constants as literals)."""
        result = self.visit(node)
        if isinstance(result, _Const):
            return _literal(result.value, self.expression)
        return result

    def visit(self, node: ast.AST) -> _Const | str:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise self.fail(f"{type(node).__name__} is not part of the constraint language")
        out: _Const | str = method(node)
        return out

    def visit_Constant(self, node: ast.Constant) -> _Const:
        if not isinstance(node.value, (bool, int, float, str)):
            raise self.fail(f"literal {node.value!r} is not allowed")
        return _Const(node.value)

    def visit_Name(self, node: ast.Name) -> _Const | str:
        if node.id in self.sizes:
            return node.id
        if node.id in self.config:
            return _Const(self.config[node.id])
        if node.id in ("True", "False"):
            return _Const(node.id == "True")
        raise self.fail(f"{node.id!r} is neither a knob nor a size of the entry point")

    def visit_BinOp(self, node: ast.BinOp) -> _Const | str:
        left, right = self.visit(node.left), self.visit(node.right)
        op = type(node.op)
        if isinstance(left, _Const) and isinstance(right, _Const):
            return self._fold(op, left.value, right.value)
        a, b = self.c(node.left), self.c(node.right)
        if op in _C_ARITH:
            return f"({a} {_C_ARITH[op]} {b})"
        if op is ast.FloorDiv:
            return f"kt_floordiv({a}, {b})"
        if op is ast.Mod:
            return f"kt_mod({a}, {b})"
        if op is ast.Div:
            return f"kt_div((double)({a}), (double)({b}))"
        raise self.fail(f"{type(node.op).__name__} on a size is not supported at run time")

    def _fold(self, op: type[ast.AST], a: Any, b: Any) -> _Const:
        fn = _FOLD.get(op)
        if fn is None:
            raise self.fail(f"{op.__name__} is not part of the constraint language")
        if op is ast.Pow and isinstance(b, int) and abs(b) > 1024:
            raise self.fail("power too large")
        try:
            return _Const(fn(a, b))
        except ZeroDivisionError:
            return _Const(False)
        except TypeError as exc:
            raise self.fail(str(exc)) from None

    def visit_UnaryOp(self, node: ast.UnaryOp) -> _Const | str:
        operand = self.visit(node.operand)
        if isinstance(operand, _Const):
            if isinstance(node.op, ast.Not):
                return _Const(not _truth(operand.value, self.expression))
            if isinstance(node.op, ast.USub):
                return _Const(-operand.value)
            if isinstance(node.op, ast.UAdd):
                return _Const(+operand.value)
            raise self.fail("~ is not part of the constraint language")
        symbol = {ast.Not: "!", ast.USub: "-", ast.UAdd: "+"}.get(type(node.op))
        if symbol is None:
            raise self.fail("~ is not part of the constraint language")
        return f"({symbol}{operand})"

    def visit_BoolOp(self, node: ast.BoolOp) -> _Const | str:
        joiner = " && " if isinstance(node.op, ast.And) else " || "
        parts: list[str] = []
        for value in node.values:
            part = self.visit(value)
            if isinstance(part, _Const):
                truth = _truth(part.value, self.expression)
                if isinstance(node.op, ast.And) and not truth:
                    return _Const(False) if not parts else f"({joiner.join(parts)} && 0)"
                if isinstance(node.op, ast.Or) and truth:
                    return _Const(True) if not parts else f"({joiner.join(parts)} || 1)"
                continue
            parts.append(f"({part} != 0)")
        if not parts:
            return _Const(isinstance(node.op, ast.And))
        return f"({joiner.join(parts)})"

    def visit_IfExp(self, node: ast.IfExp) -> _Const | str:
        test = self.visit(node.test)
        if isinstance(test, _Const):
            return self.visit(node.body if _truth(test.value, self.expression) else node.orelse)
        return f"(({test}) ? {self.c(node.body)} : {self.c(node.orelse)})"

    def visit_Compare(self, node: ast.Compare) -> _Const | str:
        terms: list[str] = []
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                terms.append(self._membership(left, right, isinstance(op, ast.NotIn)))
            else:
                a, b = self.visit(left), self.visit(right)
                if isinstance(a, _Const) and isinstance(b, _Const):
                    held = self._fold(type(op), a.value, b.value).value
                    terms.append("1" if held else "0")
                else:
                    terms.append(f"({self.c(left)} {_C_COMPARE[type(op)]} {self.c(right)})")
            left = right
        if all(t in ("0", "1") for t in terms):
            return _Const(all(t == "1" for t in terms))
        return "(" + " && ".join(terms) + ")"

    def _membership(self, left: ast.AST, right: ast.AST, negate: bool) -> str:
        if not isinstance(right, (ast.List, ast.Tuple, ast.Set)):
            raise self.fail("'in' needs a list, tuple or set written out")
        item = self.visit(left)
        options = [self.visit(e) for e in right.elts]
        if isinstance(item, _Const) and all(isinstance(o, _Const) for o in options):
            found = any(item.value == o.value for o in options if isinstance(o, _Const))
            return "1" if found != negate else "0"
        text = self.c(left)
        tests = [f"({text} == {self.c(e)})" for e in right.elts] or ["0"]
        joined = " || ".join(tests)
        return f"(!({joined}))" if negate else f"({joined})"

    def visit_Call(self, node: ast.Call) -> _Const | str:
        if not isinstance(node.func, ast.Name) or node.func.id not in ("min", "max", "abs"):
            raise self.fail("only min(), max() and abs() may be called")
        if node.keywords:
            raise self.fail(f"{node.func.id}() takes no keyword arguments")
        args = list(node.args)
        if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple, ast.Set)):
            args = list(args[0].elts)
        if not args or (node.func.id == "abs" and len(args) != 1):
            raise self.fail(f"{node.func.id}() needs arguments")
        values = [self.visit(a) for a in args]
        if all(isinstance(v, _Const) for v in values):
            consts = [v.value for v in values if isinstance(v, _Const)]
            if node.func.id == "abs":
                return _Const(abs(consts[0]))
            return _Const(min(consts) if node.func.id == "min" else max(consts))
        texts = [self.c(a) for a in args]
        if node.func.id == "abs":
            return f"kt_abs64({texts[0]})"
        helper = "kt_min64" if node.func.id == "min" else "kt_max64"
        out = texts[0]
        for t in texts[1:]:
            out = f"{helper}({out}, {t})"
        return out
