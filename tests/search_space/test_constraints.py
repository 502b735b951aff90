"""The constraint language: Python semantics, vectorised, and every rejection."""

from __future__ import annotations

import itertools
import random
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from ktune.search_space.constraints import Constraint, ConstraintError, parse_constraint
from ktune.search_space.excerpt import excerpt

NAMES = ("a", "b", "c")


def grid(values: range | list[int] = range(-3, 5)) -> dict[str, np.ndarray]:
    rows = np.array(list(itertools.product(values, repeat=len(NAMES))), dtype=np.int64)
    return {n: rows[:, i] for i, n in enumerate(NAMES)}


def check_against_python(expression: str, columns: dict[str, np.ndarray], oracle) -> None:
    got = parse_constraint(expression, columns).evaluate(columns)
    rows = [dict(zip(columns, vals)) for vals in zip(*(c.tolist() for c in columns.values()))]
    want = np.array([oracle(expression, r) for r in rows], dtype=bool)
    assert got.dtype == bool and got.shape == want.shape
    bad = np.flatnonzero(got != want)
    assert not bad.size, f"{expression}: differs from Python at {rows[bad[0]]} (got {got[bad[0]]})"


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_match_python(seed, make_expression, oracle):
    rng = random.Random(seed)
    columns = grid(range(-3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarnings leak out
        for _ in range(60):
            check_against_python(make_expression(rng, NAMES), columns, oracle)


@pytest.mark.parametrize(
    "expression",
    [
        "32 <= a * b <= 1024",
        "a < b < c",
        "a < b > c != 0",
        "a == b == c",
        "1 < 2 < a",
        "a in [1, 2, 4]",
        "a not in (0, -1)",
        "a in {b, c + 1}",
        "a // b == c",
        "a % b == c % 3",
        "a ** 2 + b ** 3 > c",
        "a ** b >= 1",
        "a / b > 0.5",
        "b == 0 or a / b > 1",
        "b != 0 and a % b == 0",
        "(a if b else c) > 0",
        "a // b > 0 if b else True",
        "not (a and b)",
        "(a or b) == c",
        "(a and b) + 1 > 1",
        "max(a, b, c) - min(a, b, c) <= 3",
        "max([a, b]) == abs(c)",
        "-a + +b == -(c - 1)",
        "(a > 0) + (b > 0) == 1",
        "True",
        "0",
        "1.5 * a > b",
        "a % 2.5 > 1",
        "a // 1.5 == b",
    ],
)
def test_semantics_match_python(expression, oracle):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_against_python(expression, grid(), oracle)


def test_chained_comparison_on_block_sizes():
    bx = np.array([1, 2, 4, 8, 16, 32] * 3)
    by = np.array([16] * 6 + [32] * 6 + [64] * 6)
    got = parse_constraint(
        "32 <= block_size_x * block_size_y <= 1024", ["block_size_x", "block_size_y"]
    ).evaluate({"block_size_x": bx, "block_size_y": by})
    assert got.tolist() == [32 <= x * y <= 1024 for x, y in zip(bx.tolist(), by.tolist())]


def test_floor_division_and_modulo_follow_python_signs():
    a, b = np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])
    c = parse_constraint("a // b * 10 + a % b", ["a", "b"])
    # a // b * 10 + a % b is never 0 for these rows; check the values through comparisons
    for k in range(-40, 40):
        got = parse_constraint(f"a // b * 10 + a % b == {k}", ["a", "b"]).evaluate({"a": a, "b": b})
        assert got.tolist() == [x // y * 10 + x % y == k for x, y in zip(a.tolist(), b.tolist())]
    assert c.names == {"a", "b"}


@pytest.mark.parametrize(
    "expression", ["a / b > 0", "a // b >= 0", "a % b == 0", "b ** -1 > 0", "1 / 0 == 1"]
)
def test_division_by_zero_fails_the_row_without_warnings(expression):
    c = parse_constraint(expression, ["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = c.evaluate({"a": np.array([4, 4, 0]), "b": np.array([0, 2, 0])})
    zero_rows = [0, 2]
    assert not got[zero_rows].any()


def test_division_by_zero_in_an_unevaluated_branch_is_harmless():
    cols = {"a": np.array([4, 4]), "b": np.array([0, 2])}
    assert parse_constraint("b == 0 or a / b == 2", ["a", "b"]).evaluate(cols).tolist() == [
        True,
        True,
    ]
    assert parse_constraint("b != 0 and a // b == 2", ["a", "b"]).evaluate(cols).tolist() == [
        False,
        True,
    ]
    assert parse_constraint("(a / b if b else 2) == 2", ["a", "b"]).evaluate(cols).tolist() == [
        True,
        True,
    ]
    assert parse_constraint("0 < b < a / b", ["a", "b"]).evaluate(cols).tolist() == [False, False]
    assert parse_constraint("a / b == 2 or b == 0", ["a", "b"]).evaluate(cols).tolist() == [
        False,
        True,
    ]


def test_power_overflow_is_exact():
    c = parse_constraint("a ** 40 > 10 ** 30", ["a"])
    assert c.evaluate({"a": np.array([10, 2, -10])}).tolist() == [True, False, True]
    assert parse_constraint("a ** -1 == 0.5", ["a"]).evaluate({"a": np.array([2, 4])}).tolist() == [
        True,
        False,
    ]
    assert not parse_constraint("a ** 0.5 > 0", ["a"]).holds({"a": -4.0})  # complex in Python


# int64 extremes, values near 2**53 and 2**62, and small ones: sums and products of these
# leave int64, which must never wrap around (it used to, silently)
BIG = [
    -(2**63) + 1,
    -(2**62),
    -3 * 2**40,
    -5,
    -1,
    0,
    1,
    2,
    7,
    3 * 2**31,
    2**53 + 1,
    2**62 + 12345,
    2**63 - 1,
]


@pytest.mark.parametrize("seed", range(4))
def test_random_expressions_on_big_ints_match_python(seed, make_expression, oracle):
    rng = random.Random(seed)
    rows = rng.sample(list(itertools.product(BIG, repeat=len(NAMES))), 400)
    columns = {n: np.array([r[i] for r in rows], dtype=np.int64) for i, n in enumerate(NAMES)}
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warnings either
        while checked < 60:
            expression = make_expression(rng, NAMES)
            if re.search(r"(?<!/)/(?!/)", expression):
                continue  # true division gives floats, whose comparison with big ints is inexact
            check_against_python(expression, columns, oracle)
            checked += 1


@pytest.mark.parametrize(
    "expression",
    [
        "a * 2**62 > 0",
        "a + 2**62 + 2**62 > 0",
        "-2**62 - 2**62 - a < 0",
        "a * 2**62 * 2**62 // 2**62 // 2**62 == a",  # back into int64, exactly
        "a * 2**62 + 1 > a * 2**62",  # exact, where float64 would round the 1 away
        "(a * 2**62) % 3 == (a * (2**62 % 3)) % 3",
        "a ** 40 > 2**62 and a ** 40 % 2 == a % 2",
        "abs(-a * 2**62) == a * 2**62",
        "max(a * 2**62, 1) > min(-a * 2**62, 0)",
        "(a * 2**62 if a > 2 else a) > 0",
        "a * 2**62 in [2**62, 2**63, 2**64]",
    ],
)
def test_int_overflow_is_exact_not_wrapped(expression, oracle):
    columns = {"a": np.array([1, 2, 3, 4, 5, 1024], dtype=np.int64)}
    check_against_python(expression, columns, oracle)


def test_overflow_does_not_empty_a_space():
    from ktune.search_space.parameters import Parameter
    from ktune.search_space.space import SearchSpace

    block = Parameter.of("block_size_x", [16, 32, 64, 128])
    assert len(SearchSpace([block], ["block_size_x * 2**62 > 0"])) == 4
    assert len(SearchSpace([block], ["block_size_x * 2**62 < 0"])) == 0


def test_int64_edges_leave_int64_exactly():
    lowest = {"a": np.array([-(2**63), 5], dtype=np.int64)}
    assert parse_constraint("-a > 0", ["a"]).evaluate(lowest).tolist() == [True, False]
    assert parse_constraint("abs(a) == 2**63", ["a"]).evaluate(lowest).tolist() == [True, False]
    assert parse_constraint("a // -1 > 0", ["a"]).evaluate(lowest).tolist() == [True, False]
    # true division is correctly rounded, as Python's int / int, also beyond 2**53
    c = parse_constraint("a / 3 == q", ["a"], {"q": (2**53 + 1) / 3})
    assert c.evaluate({"a": np.array([2**53 + 1])}).tolist() == [True]


def test_wide_and_narrow_int_columns_are_exact():
    unsigned = {"a": np.array([2**64 - 1, 1], dtype=np.uint64)}
    assert parse_constraint("a - 2**63 > 0", ["a"]).evaluate(unsigned).tolist() == [True, False]
    narrow = {"a": np.array([2**20, -(2**20)], dtype=np.int32)}
    assert parse_constraint("a * a == 2**40", ["a"]).evaluate(narrow).tolist() == [True, True]
    huge = {"a": np.array([10**30, 2], dtype=object)}  # what a parameter of huge ints gives
    assert parse_constraint("a * 2 > 10**30 + 1", ["a"]).evaluate(huge).tolist() == [True, False]
    assert parse_constraint("a % 7 == 10**30 % 7", ["a"]).evaluate(huge).tolist() == [True, False]


@pytest.mark.parametrize(
    "expression,columns",
    [
        ("2 ** a > 0", {"a": np.array([1, 5000])}),  # an int of 5000 bits
        ("a * 0.5 > 1", {"a": np.array([10**400, 1], dtype=object)}),  # int to float
        ("a / 3 > 1", {"a": np.array([10**400, 1], dtype=object)}),
    ],
)
def test_values_beyond_floats_are_a_clear_error(expression, columns):
    with pytest.raises(ConstraintError) as info:
        parse_constraint(expression, ["a"]).evaluate(columns)
    assert str(info.value) == (
        f"constraint {expression!r}: a value is too large to compute"
        " (beyond the float range, about 1.8e308)"
    )


@pytest.mark.parametrize("dtype", [None, object])
def test_string_columns(dtype):
    s = np.array(["row", "col", "tiled"], dtype=dtype)
    names = ["s", "a"]
    cols = {"s": s, "a": np.array([1, 2, 3])}

    def ev(expr: str) -> list[bool]:
        return parse_constraint(expr, names).evaluate(cols).tolist()

    assert ev("s == 'row'") == [True, False, False]
    assert ev("s != 'row' and a > 1") == [False, True, True]
    assert ev("s in ['col', 'tiled']") == [False, True, True]
    assert ev("s not in ('col',)") == [True, False, True]
    assert ev("s == 1") == [False, False, False]
    assert ev("s != 1") == [True, True, True]
    assert ev("'row' == s or a == 3") == [True, False, True]
    assert ev("s < 'row'") == ["row" > x for x in ["row", "col", "tiled"]]
    assert ev("s") == [True, True, True]
    with pytest.raises(ConstraintError, match="cannot order text against a number"):
        ev("s < 3")
    with pytest.raises(ConstraintError, match="arithmetic needs numbers"):
        ev("s + 1 > 0")


def test_bool_columns():
    cols = {"f": np.array([True, False, True]), "a": np.array([1, 2, 3])}
    names = ["f", "a"]
    assert parse_constraint("f and a > 1", names).evaluate(cols).tolist() == [False, False, True]
    assert parse_constraint("not f", names).evaluate(cols).tolist() == [False, True, False]
    assert parse_constraint("f == True", names).evaluate(cols).tolist() == [True, False, True]
    assert parse_constraint("f + f == 2", names).evaluate(cols).tolist() == [True, False, True]
    assert parse_constraint("-f == -1", names).evaluate(cols).tolist() == [True, False, True]
    assert parse_constraint("f or a == 2", names).evaluate(cols).tolist() == [True, True, True]


def test_float_columns(oracle):
    cols = {"a": np.array([0.5, 1.0, 2.5, -1.5]), "b": np.array([2, 0, 3, 1])}
    for expr in ["a * b > 1", "a / b < 1", "a // 1 == b - 1", "a % 1 == 0.5", "max(a, b) == 2.5"]:
        check_against_python(expr, cols, oracle)


def test_constant_expression_has_input_length():
    for expr, want in [("1 < 2", True), ("0", False), ("'x' == 'y'", False), ("1 / 0 > 0", False)]:
        c = parse_constraint(expr, ["a"])
        assert c.names == frozenset()
        got = c.evaluate({"a": np.arange(5)})
        assert got.dtype == bool and got.tolist() == [want] * 5
        assert c.evaluate({}, size=3).tolist() == [want] * 3
        assert c.evaluate({}).tolist() == [want]


def test_scalar_columns_broadcast():
    c = parse_constraint("a * b <= 8", ["a", "b"])
    assert c.evaluate({"a": np.array([1, 2, 4, 8]), "b": 2}).tolist() == [True, True, True, False]


def test_named_constants():
    c = parse_constraint("a * b <= MAX_THREADS", ["a", "b"], {"MAX_THREADS": 16, "UNUSED": 1})
    assert c.names == {"a", "b"}
    assert c.constants == (("MAX_THREADS", 16),)
    assert c.evaluate({"a": np.array([2, 4, 8]), "b": np.array([4, 4, 4])}).tolist() == [
        True,
        True,
        False,
    ]
    with pytest.raises(ConstraintError, match="constant 'L' is not a number, bool or string"):
        parse_constraint("a < L", ["a"], {"L": [1, 2]})  # type: ignore[dict-item]
    # a parameter shadows a constant of the same name
    assert parse_constraint("a > 0", ["a"], {"a": -1}).names == {"a"}


def test_holds_and_equality():
    c = parse_constraint(
        "block_size_x * block_size_y <= 1024", ["block_size_x", "block_size_y", "other"]
    )
    assert c.names == {"block_size_x", "block_size_y"}
    assert c.holds({"block_size_x": 32, "block_size_y": 32, "other": "x"})
    assert not c.holds({"block_size_x": 64, "block_size_y": 32})
    assert c == parse_constraint(
        "block_size_x * block_size_y <= 1024", ["block_size_x", "block_size_y"]
    )
    assert (
        len(
            {
                c,
                parse_constraint(
                    "block_size_x * block_size_y <= 1024", ["block_size_x", "block_size_y"]
                ),
            }
        )
        == 1
    )
    assert str(c) == c.expression
    direct = Constraint("a < b", frozenset({"a", "b", "z"}))
    assert direct.names == {"a", "b"} and direct.holds({"a": 1, "b": 2})
    with pytest.raises(ConstraintError, match="no column for"):
        c.holds({"block_size_x": 1})


def test_whitespace_and_parentheses():
    c = parse_constraint("  (\n a\n + 1) > 2  ", ["a"])
    assert c.evaluate({"a": np.array([1, 2])}).tolist() == [False, True]


REJECTED = [
    ("block_size_x * bogus <= 1024", "unknown name 'bogus'"),
    ("a <=", "syntax error at column 4"),
    ("a +* 2", "syntax error at column 4"),
    ("(a", "syntax error at column 1"),
    ("", "empty expression"),
    ("   ", "empty expression"),
    ("a.b > 1", "attribute access is not allowed"),
    ("a.bit_length() > 1", "attribute access is not allowed"),
    ("a[0] > 1", "subscripts are not allowed"),
    ("open('x')", "call to 'open' is not allowed"),
    ("__import__('os')", "call to '__import__' is not allowed"),
    ("len(a)", "call to 'len' is not allowed"),
    ("(lambda: 1)() > 0", "lambda is not allowed"),
    ("(lambda x: x)", "lambda is not allowed"),
    ("[x for x in [1]]", "comprehensions are not allowed"),
    ("any(x for x in [1])", "call to 'any' is not allowed"),
    ("{x for x in [1]}", "comprehensions are not allowed"),
    ("f'{a}' == '1'", "f-strings are not allowed"),
    ("(a := 3) > 1", "assignment expressions (:=) are not allowed"),
    ("{'a': 1}", "dict displays are not allowed"),
    ("[1, 2]", "only allowed after 'in'"),
    ("(1, 2)", "only allowed after 'in'"),
    ("a in b", "'in' needs a literal list"),
    ("a in 'abc'", "'in' needs a literal list"),
    ("a in [1] == b", "'in' cannot be part of a chained comparison"),
    ("a is 1", "operator 'is' is not allowed"),
    ("a is not None", "operator 'is not' is not allowed"),
    ("a & b", "operator '&' is not allowed"),
    ("a | b", "operator '|' is not allowed"),
    ("a ^ b", "operator '^' is not allowed"),
    ("a << 1", "operator '<<' is not allowed"),
    ("a >> 1", "operator '>>' is not allowed"),
    ("a @ b", "operator '@' is not allowed"),
    ("~a", "operator '~' is not allowed"),
    ("None", "literal None is not allowed"),
    ("a == b'x'", "literal b'x' is not allowed"),
    ("a == 1j", "literal 1j is not allowed"),
    ("a == ...", "literal Ellipsis is not allowed"),
    (f"a < {2**64}", "too large"),
    ("min(a)", "min() of one argument needs a literal list"),
    ("max()", "max() needs at least one value"),
    ("min([]) > 1", "min() needs at least one value"),
    ("abs(a, b)", "abs() takes exactly one argument"),
    ("max(a, b, key=a)", "takes no keyword arguments"),
    ("max(*[a])", "starred expressions are not allowed"),
    ("min > 1", "unknown name 'min'"),
    ("a = 1", "syntax error"),
    ("import os", "syntax error"),
    ("a; b", "syntax error"),
    ("a if b", "syntax error"),
    ("1 +" + "(" * 1000 + "1" + ")" * 1000, "too many nested parentheses"),
    ("-" * 100_000 + "a", "too deeply nested"),
    ("a\x00", "null bytes"),
]


@pytest.mark.parametrize(("expression", "problem"), REJECTED)
def test_rejections_name_expression_and_problem(expression, problem):
    with pytest.raises(ConstraintError) as info:
        parse_constraint(expression, ["a", "b", "block_size_x"])
    message = str(info.value)
    assert message.startswith(f"constraint {excerpt(expression)}: ")
    assert problem in message
    assert "\n" not in message
    assert isinstance(info.value, ValueError)


def test_non_string_expression_is_rejected():
    with pytest.raises(ConstraintError, match="must be a string"):
        parse_constraint(42, ["a"])  # type: ignore[arg-type]


def test_syntax_error_column_counts_leading_spaces():
    with pytest.raises(ConstraintError, match="syntax error at column 6"):
        parse_constraint("  a +* 2", ["a"])


def test_library_never_evaluates_text():
    source = Path(__file__).resolve().parents[2] / "search_space"
    pattern = re.compile(r"(?<![\w.])(eval|exec|compile)\s*\(")
    for path in source.rglob("*.py"):
        assert not pattern.search(path.read_text()), f"{path} calls eval/exec/compile"


@pytest.mark.parametrize(
    "expression",
    ["('a' if block_size_x else 1.5) == 1", "(block_size_x or 'a') == 1"],
)
def test_text_and_numbers_mixed_in_one_value_are_a_constraint_error(expression: str) -> None:
    from ktune.search_space.parameters import Parameter
    from ktune.search_space.space import SearchSpace

    with pytest.raises(ConstraintError, match="both be numbers or both be text"):
        len(SearchSpace([Parameter.of("block_size_x", [0, 1, 2])], [expression]))
