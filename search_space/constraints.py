"""Constraint language: a safe subset of Python expressions, evaluated vectorised over numpy.

An expression is parsed with :func:`ast.parse` and compiled by this module into a tree of
closures; user text is never passed to ``eval``/``exec``. Allowed:

* literals (int, float, bool, str), parameter names and named constants, parentheses;
* ``+ - * / // % **``, unary ``- +``, ``not``, ``and``, ``or``, ``a if c else b``;
* comparisons ``== != < <= > >=``, chains included (``32 <= a * b <= 1024``);
* ``x in [...]`` / ``x not in (...)`` with a list, tuple or set display on the right;
* ``min(...)``, ``max(...)`` (several arguments or one display) and ``abs(x)``.

Semantics follow Python on each row. Integer arithmetic is exact, as in Python: it runs in
int64 where no row can leave the int64 range (a cheap bound on the operands' magnitudes) and
in Python ints otherwise, so it never wraps around. A row whose evaluation would raise
``ZeroDivisionError`` (or produce a complex number) does not satisfy the constraint;
``and``/``or``/``if`` short-circuit per row as Python does. An int too large for a float
where a float is needed (Python's ``OverflowError``), or an int power of over ~1024 bits, is a
:class:`ConstraintError` naming the expression.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ktune.search_space.excerpt import excerpt
from ktune.search_space.parameters import Value

__all__ = ["Constraint", "ConstraintError", "parse_constraint"]

# ``err`` marks the rows where Python would have raised; ``None`` means no row did.
_Result = tuple[Any, Any]
_Fn = Callable[[Mapping[str, np.ndarray]], _Result]

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_EXACT_FLOAT = 2**53  # ints up to this magnitude convert to float64 exactly
_FUNCTIONS = ("min", "max", "abs")
_ARITH: dict[type[ast.operator], Callable[..., Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
}
_DIVISIONS: dict[type[ast.operator], Callable[..., Any]] = {
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[..., Any]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}
_SYMBOLS: dict[type[ast.AST], str] = {
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Is: "is",
    ast.IsNot: "is not",
}
_REJECTED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "subscripts are not allowed",
    ast.Slice: "slices are not allowed",
    ast.Lambda: "lambda is not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.FormattedValue: "f-strings are not allowed",
    ast.NamedExpr: "assignment expressions (:=) are not allowed",
    ast.Dict: "dict displays are not allowed",
    ast.Starred: "starred expressions are not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
}


class ConstraintError(ValueError):
    """A constraint cannot be parsed or evaluated; the one-line message names the expression."""


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint. Build with :func:`parse_constraint`.

    ``names`` are the parameters it reads and ``constants`` the named constants it uses (with
    their values). Constructing one directly parses ``expression`` against ``names``/``constants``
    and narrows both to what the expression uses.
    """

    expression: str
    names: frozenset[str]
    constants: tuple[tuple[str, Value], ...] = ()
    _fn: _Fn = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        compiler = _Compiler(self.expression, self.names, dict(self.constants))
        object.__setattr__(self, "_fn", compiler.build())
        object.__setattr__(self, "names", frozenset(compiler.used_names))
        used = sorted((n, v) for n, v in self.constants if n in compiler.used_constants)
        object.__setattr__(self, "constants", tuple(used))

    def evaluate(self, columns: Mapping[str, np.ndarray], size: int | None = None) -> np.ndarray:
        """Boolean array: which rows satisfy the constraint.

        ``columns`` maps each name in :attr:`names` to an array (all of one length) or a scalar.
        ``size`` is the number of rows; by default the length of the columns (1 if none).
        """
        n = _row_count(columns, self.names) if size is None else size
        missing = self.names - set(columns)
        if missing:
            raise ConstraintError(
                f"constraint {excerpt(self.expression)}: no column for {sorted(missing)}"
            )
        with np.errstate(all="ignore"):
            try:
                value, err = self._fn(columns)
            except OverflowError:  # raised by Python itself, or by _power for a huge result
                raise ConstraintError(
                    f"constraint {excerpt(self.expression)}: a value is too large to compute"
                    " (beyond the float range, about 1.8e308)"
                ) from None
            ok = _truth(value)
            if err is not None:
                ok = ok & ~err
        return np.broadcast_to(ok, (n,)).copy()

    def holds(self, config: Mapping[str, Value]) -> bool:
        """Whether one config satisfies the constraint."""
        return bool(
            self.evaluate({n: np.asarray([config[n]]) for n in self.names if n in config}, 1)[0]
        )

    def __str__(self) -> str:
        return self.expression

    def __reduce__(self) -> tuple[Any, ...]:
        # The compiled closures do not pickle; the text does, and re-parsing is cheap.
        return (Constraint, (self.expression, self.names, self.constants))


def parse_constraint(
    expression: str, names: Iterable[str], constants: Mapping[str, Value] | None = None
) -> Constraint:
    """Parse ``expression`` over parameter ``names`` and optional named ``constants``."""
    allowed = frozenset(names)
    consts = dict(constants or {})
    compiler = _Compiler(expression, allowed, consts)
    compiler.build()
    used = tuple(sorted((n, consts[n]) for n in compiler.used_constants))
    return Constraint(expression, frozenset(compiler.used_names), used)


def _row_count(columns: Mapping[str, Any], names: frozenset[str]) -> int:
    for name in sorted(names) or list(columns):
        if name in columns:
            shape = np.shape(columns[name])
            if shape:
                return int(shape[0])
    return 1


# --- value helpers -----------------------------------------------------------------------


def _or(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _only_where(err: Any, where: Any) -> Any:
    return None if err is None else err & where


def _is_text(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if not isinstance(value, (np.ndarray, np.generic)):
        return False
    kind = value.dtype.kind
    return kind in "US" or (kind == "O" and not _numeric_objects(np.asarray(value)))


def _numeric_objects(arr: np.ndarray) -> bool:
    """Whether the object array ``arr`` holds only numbers (ints beyond int64, mostly)."""
    return all(isinstance(x, (int, float, np.number, np.bool_)) for x in arr.flat)


def _truth(value: Any) -> Any:
    """Python truthiness, elementwise."""
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind == "b":
        return arr
    if kind in "iuf":
        return arr != 0
    if kind in "US":
        return np.char.str_len(arr) > 0
    return np.vectorize(bool, otypes=[bool])(arr) if arr.ndim else np.bool_(bool(arr.item()))


def _pick(cond: Any, a: Any, b: Any) -> Any:
    """``a`` where ``cond`` else ``b``; stays boolean when both are."""
    if np.asarray(a).dtype == bool and np.asarray(b).dtype == bool:
        return (cond & a) | (~cond & b)
    return np.where(cond, a, b)


# --- the compiler ------------------------------------------------------------------------


class _Compiler:
    """Validates an expression's AST and turns it into closures over numpy columns."""

    def __init__(self, expression: str, names: frozenset[str], constants: dict[str, Value]) -> None:
        self.expression = expression
        self.names = names
        self.constants = constants
        self.used_names: set[str] = set()
        self.used_constants: set[str] = set()

    def fail(self, problem: str) -> ConstraintError:
        return ConstraintError(f"constraint {excerpt(self.expression)}: {problem}")

    def _same_kind(self, a: Any, b: Any, what: str) -> None:
        """Text and numbers do not mix in one value: a ConstraintError, not numpy's error."""
        if _is_text(a) != _is_text(b):
            raise self.fail(f"{what} must both be numbers or both be text")

    def build(self) -> _Fn:
        if not isinstance(self.expression, str):
            raise ConstraintError(f"constraint {excerpt(self.expression)}: must be a string")
        if not self.expression.strip():
            raise self.fail("empty expression")
        try:
            tree = ast.parse(self.expression.strip(), mode="eval")
        except SyntaxError as e:
            raise self.fail(self._syntax(e)) from None
        except ValueError:
            raise self.fail("expression contains null bytes") from None
        except (RecursionError, MemoryError):
            raise self.fail("expression is too deeply nested") from None
        try:
            return self.visit(tree.body)
        except RecursionError:
            raise self.fail("expression is too deeply nested") from None

    def _syntax(self, e: SyntaxError) -> str:
        text = self.expression.strip()
        column = e.offset if e.offset and 1 <= e.offset <= len(text) else len(text)
        if (e.lineno or 1) <= 1:  # report columns of the expression as given, not as stripped
            column += len(self.expression) - len(self.expression.lstrip())
        where = f"column {column}" if (e.lineno or 1) <= 1 else f"line {e.lineno}, column {column}"
        detail = "" if e.msg in ("invalid syntax", None) else f" ({e.msg})"
        return f"syntax error at {where}{detail}"

    def visit(self, node: ast.AST) -> _Fn:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise self.fail(
                _REJECTED.get(type(node), f"{type(node).__name__} expressions are not allowed")
            )
        fn: _Fn = method(node)
        return fn

    def _operator(self, op: ast.AST) -> str:
        return _SYMBOLS.get(type(op), type(op).__name__)

    # leaves

    def visit_Constant(self, node: ast.Constant) -> _Fn:
        value = node.value
        if value is None or isinstance(value, (bytes, complex)) or value is Ellipsis:
            raise self.fail(f"literal {excerpt(value)} is not allowed")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT64_MAX:
            raise self.fail(f"integer literal {value} is too large")
        return lambda env: (value, None)

    def visit_Name(self, node: ast.Name) -> _Fn:
        name = node.id
        if name in self.names:
            self.used_names.add(name)
            return lambda env: (env[name], None)
        if name in self.constants:
            value = self.constants[name]
            if not isinstance(value, (int, float, str, np.integer, np.floating, np.bool_)):
                raise self.fail(f"constant {excerpt(name)} is not a number, bool or string")
            self.used_constants.add(name)
            return lambda env: (value, None)
        raise self.fail(f"unknown name {excerpt(name)}")

    def visit_List(self, node: ast.AST) -> _Fn:
        raise self.fail("lists, tuples and sets are only allowed after 'in' or inside min()/max()")

    visit_Tuple = visit_Set = visit_List

    # operators

    def visit_BinOp(self, node: ast.BinOp) -> _Fn:
        left, right, op = self.visit(node.left), self.visit(node.right), type(node.op)
        fail = self.fail
        if op in _ARITH:
            ufunc = _ARITH[op]

            def arith(env: Mapping[str, np.ndarray]) -> _Result:
                (a, ea), (b, eb) = left(env), right(env)
                return _arith(ufunc, _number(a, fail), _number(b, fail)), _or(ea, eb)

            return arith
        if op in _DIVISIONS:
            ufunc = _DIVISIONS[op]

            def divide(env: Mapping[str, np.ndarray]) -> _Result:
                (a, ea), (b, eb) = left(env), right(env)
                a, b = _number(a, fail), _number(b, fail)
                zero = np.asarray(b == 0)
                return _divide(ufunc, a, b, zero), _or(_or(ea, eb), zero if zero.any() else None)

            return divide
        if op is ast.Pow:

            def power(env: Mapping[str, np.ndarray]) -> _Result:
                (a, ea), (b, eb) = left(env), right(env)
                value, err = _power(_number(a, fail), _number(b, fail))
                return value, _or(_or(ea, eb), err)

            return power
        raise self.fail(f"operator {self._operator(node.op)!r} is not allowed")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> _Fn:
        inner, op, fail = self.visit(node.operand), type(node.op), self.fail
        if op is ast.Not:
            return lambda env: _map(inner(env), lambda v: ~_truth(v))
        if op is ast.USub:
            return lambda env: _map(inner(env), lambda v: _unary(np.negative, _number(v, fail)))
        if op is ast.UAdd:
            return lambda env: _map(inner(env), lambda v: _number(v, fail))
        raise self.fail(f"operator {self._operator(node.op)!r} is not allowed")

    def visit_BoolOp(self, node: ast.BoolOp) -> _Fn:
        parts = [self.visit(v) for v in node.values]
        is_or = isinstance(node.op, ast.Or)

        def boolop(env: Mapping[str, np.ndarray]) -> _Result:
            value, err = parts[0](env)
            for part in parts[1:]:
                truth = _truth(value)
                go_on = ~truth if is_or else truth  # rows where Python evaluates the next operand
                nxt, e = part(env)
                err = _or(err, _only_where(e, go_on))
                self._same_kind(nxt, value, "the operands of and/or")
                value = _pick(go_on, nxt, value)
            return value, err

        return boolop

    def visit_IfExp(self, node: ast.IfExp) -> _Fn:
        test, body, orelse = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)

        def ifexp(env: Mapping[str, np.ndarray]) -> _Result:
            (c, ec), (a, ea), (b, eb) = test(env), body(env), orelse(env)
            cond = _truth(c)
            err = _or(ec, _or(_only_where(ea, cond), _only_where(eb, ~cond)))
            self._same_kind(a, b, "the two branches of 'x if c else y'")
            return _pick(cond, a, b), err

        return ifexp

    def visit_Compare(self, node: ast.Compare) -> _Fn:
        ops = [type(op) for op in node.ops]
        if any(op in (ast.In, ast.NotIn) for op in ops):
            if len(ops) > 1:
                raise self.fail("'in' cannot be part of a chained comparison")
            return self._membership(node)
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise self.fail(f"operator {self._operator(op)!r} is not allowed")
        first = self.visit(node.left)
        rest = [(_COMPARE[op], self.visit(c)) for op, c in zip(ops, node.comparators)]
        fail = self.fail

        def compare(env: Mapping[str, np.ndarray]) -> _Result:
            left, err = first(env)
            result: Any = None
            for ufunc, fn in rest:
                right, e = fn(env)
                err = _or(err, e if result is None else _only_where(e, result))
                c = _compare(ufunc, left, right, fail)
                result = c if result is None else result & c
                left = right
            return result, err

        return compare

    def _membership(self, node: ast.Compare) -> _Fn:
        display = node.comparators[0]
        if not isinstance(display, (ast.List, ast.Tuple, ast.Set)):
            raise self.fail("'in' needs a literal list, tuple or set on its right")
        needle = self.visit(node.left)
        items = [self.visit(e) for e in display.elts]
        negate = isinstance(node.ops[0], ast.NotIn)
        fail = self.fail

        def member(env: Mapping[str, np.ndarray]) -> _Result:
            x, err = needle(env)
            found: Any = np.False_
            for item in items:
                v, e = item(env)
                err = _or(err, e)
                found = found | _compare(np.equal, x, v, fail)
            return (~found if negate else found), err

        return member

    def visit_Call(self, node: ast.Call) -> _Fn:
        func = node.func
        if not isinstance(func, ast.Name):
            self.visit(func)  # reports attribute access, lambdas, ...
            raise self.fail("only min(), max() and abs() may be called")
        if func.id not in _FUNCTIONS:
            raise self.fail(f"call to {excerpt(func.id)} is not allowed (only min, max, abs)")
        if node.keywords:
            raise self.fail(f"{func.id}() takes no keyword arguments")
        args = list(node.args)
        if any(isinstance(a, ast.Starred) for a in args):
            raise self.fail(_REJECTED[ast.Starred])
        if func.id == "abs":
            if len(args) != 1:
                raise self.fail("abs() takes exactly one argument")
            inner, fail = self.visit(args[0]), self.fail
            return lambda env: _map(inner(env), lambda v: _unary(np.abs, _number(v, fail)))
        if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple, ast.Set)):
            args = list(args[0].elts)
        elif len(args) == 1:
            raise self.fail(f"{func.id}() of one argument needs a literal list or tuple")
        if not args:
            raise self.fail(f"{func.id}() needs at least one value")
        parts = [self.visit(a) for a in args]
        ufunc = np.minimum if func.id == "min" else np.maximum
        fail = self.fail

        def reduce(env: Mapping[str, np.ndarray]) -> _Result:
            value, err = parts[0](env)
            value = _number(value, fail)
            for part in parts[1:]:
                v, e = part(env)
                value, err = _compact(ufunc(value, _number(v, fail))), _or(err, e)
            return value, err

        return reduce


def _map(result: _Result, fn: Callable[[Any], Any]) -> _Result:
    return fn(result[0]), result[1]


def _number(value: Any, fail: Callable[[str], ConstraintError]) -> Any:
    """``value`` as a numeric array: int64, float, or Python ints where they exceed int64.

    Bools become ints as in Python arithmetic; narrower ints widen to int64.
    """
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind == "f" or arr.dtype == np.int64:
        return arr
    if kind == "u" and arr.dtype.itemsize == 8:  # uint64 may exceed int64
        return _compact(arr.astype(object))
    if kind in "biu":
        return arr.astype(np.int64)
    if kind == "O" and _numeric_objects(arr):
        return _compact(arr)
    raise fail("arithmetic needs numbers, got text")


def _compact(arr: Any) -> Any:
    """A numeric result as int64 or float64 where that loses nothing; ints beyond int64 stay
    an object array of Python ints. Any float makes the whole array float, as Python's
    arithmetic would (OverflowError for an int beyond the float range)."""
    if not isinstance(arr, np.ndarray) or arr.dtype != object:
        return arr
    items = arr.ravel().tolist()
    if any(isinstance(x, (float, np.floating)) for x in items):
        return arr.astype(np.float64)
    ints = [int(x) for x in items]  # numpy ints in an object array would wrap around
    if _INT64_MIN <= min(ints, default=0) and max(ints, default=0) <= _INT64_MAX:
        return np.array(ints, dtype=np.int64).reshape(arr.shape)
    return np.array(ints, dtype=object).reshape(arr.shape)


def _magnitude(x: np.ndarray) -> int:
    """The largest absolute value in the int64 array ``x`` (0 when empty), as a Python int."""
    if x.size == 0:
        return 0
    return max(-int(x.min()), int(x.max()))


def _floats(x: np.ndarray) -> np.ndarray:
    """``x`` as floats, as Python converts an int for mixed arithmetic (OverflowError if huge)."""
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _exact(ufunc: Callable[..., Any], *args: np.ndarray) -> Any:
    """``ufunc`` over Python ints: exact at any size."""
    return _compact(ufunc(*(a.astype(object) for a in args)))


def _arith(ufunc: Callable[..., Any], a: np.ndarray, b: np.ndarray) -> Any:
    """``a + b``, ``a - b`` or ``a * b``: in int64 when the operands' magnitudes bound the
    result within int64 (the common case: two reductions more), else in Python ints."""
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return ufunc(_floats(a), _floats(b))
    if a.dtype != object and b.dtype != object:
        ma, mb = _magnitude(a), _magnitude(b)
        if (ma * mb if ufunc is np.multiply else ma + mb) <= _INT64_MAX:
            return ufunc(a, b)
    return _exact(ufunc, a, b)


def _divide(ufunc: Callable[..., Any], a: np.ndarray, b: np.ndarray, zero: np.ndarray) -> Any:
    """``a / b``, ``a // b`` or ``a % b``; rows in ``zero`` get any value (they are errors).

    In int64 only ``INT64_MIN // -1`` overflows, and ``/`` is correctly rounded only while
    both ints convert to float exactly; Python ints take over beyond that.
    """
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return ufunc(_floats(a), _floats(b))
    if a.dtype != object and b.dtype != object:
        limit = _EXACT_FLOAT if ufunc is np.true_divide else _INT64_MAX
        if _magnitude(a) <= limit and _magnitude(b) <= limit:
            return ufunc(a, b)
    return _exact(ufunc, a, np.where(zero, 1, b))  # Python ints raise on a zero divisor


def _unary(ufunc: Callable[..., Any], x: np.ndarray) -> Any:
    """``-x`` or ``abs(x)``; only ``INT64_MIN`` leaves int64."""
    if x.dtype == object or (x.dtype.kind == "i" and _magnitude(x) > _INT64_MAX):
        return _exact(ufunc, x)
    return ufunc(x)


def _power(a: np.ndarray, b: np.ndarray) -> _Result:
    """``a ** b`` as Python computes it: exact ints (int64 while they fit), floats for float
    operands or a negative exponent; OverflowError when an int result has over ~1024 bits."""
    err = np.asarray((a == 0) & (b < 0))  # ZeroDivisionError in Python
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a, b = _floats(a), _floats(b)
        err = err | ((a < 0) & (np.floor(b) != b))  # Python gives a complex number
        value = np.power(a, b)
    elif np.any(b < 0):  # Python gives a float for a negative exponent
        value = np.power(_floats(a), _floats(b))
    else:
        estimate = np.abs(np.power(_floats(a), _floats(b)))
        if not np.all(np.isfinite(estimate)):
            raise OverflowError("integer power too large")
        if a.dtype != object and b.dtype != object and np.all(estimate < 2.0**62):
            value = np.power(a, b)
        else:
            value = _exact(np.power, a, b)
    return value, (err if err.any() else None)


def _compare(
    ufunc: Callable[..., Any], a: Any, b: Any, fail: Callable[[str], ConstraintError]
) -> Any:
    """Elementwise comparison; text never equals a number and cannot be ordered against one."""
    if _is_text(a) != _is_text(b):
        if ufunc is np.equal:
            return np.False_
        if ufunc is np.not_equal:
            return np.True_
        raise fail("cannot order text against a number")
    if _is_text(a) and (np.asarray(a).dtype.kind == "O" or np.asarray(b).dtype.kind == "O"):
        return np.asarray(
            ufunc(np.asarray(a, dtype=object), np.asarray(b, dtype=object)), dtype=bool
        )
    return ufunc(a, b)
