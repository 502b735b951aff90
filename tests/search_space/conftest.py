"""Shared helpers for search_space tests: a random expression generator and a Python oracle.

The oracle uses Python's own ``eval`` on trusted, generated text; that is the point of it (the
library itself never evaluates user text).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ktune.search_space.parameters import Parameter
from ktune.testing.recordings import RECORDED

_BUILTINS = {"__builtins__": {"min": min, "max": max, "abs": abs}}


def python_holds(expression: str, row: Mapping[str, Any]) -> bool:
    """What Python says about one row; a ZeroDivisionError counts as not satisfied."""
    try:
        return bool(
            eval(expression, dict(_BUILTINS), dict(row))
        )  # the test oracle, on generated text
    except ZeroDivisionError:
        return False


def product_configs(parameters: Sequence[Parameter]) -> list[dict[str, Any]]:
    """All configs of the cartesian product, in itertools.product order."""
    names = [p.name for p in parameters]
    return [
        dict(zip(names, values)) for values in itertools.product(*(p.values for p in parameters))
    ]


def random_expression(rng: random.Random, names: Sequence[str], depth: int = 3) -> str:
    """A random boolean-ish expression in the constraint language, over integer names."""

    def atom() -> str:
        if rng.random() < 0.6:
            return rng.choice(names)
        return str(rng.randint(-4, 6))

    def arith(d: int) -> str:
        if d <= 0 or rng.random() < 0.3:
            return atom()
        kind = rng.randrange(9)
        if kind <= 4:
            op = rng.choice(["+", "-", "*", "//", "%", "/"])
            return f"({arith(d - 1)} {op} {arith(d - 1)})"
        if kind == 5:
            return f"({atom()} ** {rng.randint(0, 3)})"
        if kind == 6:
            fn = rng.choice(["min", "max"])
            args = ", ".join(arith(d - 1) for _ in range(rng.randint(2, 3)))
            return f"{fn}([{args}])" if rng.random() < 0.3 else f"{fn}({args})"
        if kind == 7:
            return f"abs({arith(d - 1)})" if rng.random() < 0.5 else f"(-{arith(d - 1)})"
        return f"({arith(d - 1)} if {boolean(d - 1)} else {arith(d - 1)})"

    def boolean(d: int) -> str:
        kind = rng.randrange(6)
        if d <= 0 or kind <= 1:
            ops = [rng.choice(["==", "!=", "<", "<=", ">", ">="]) for _ in range(rng.randint(1, 3))]
            parts = [arith(d - 1) for _ in range(len(ops) + 1)]
            return "(" + " ".join(x for pair in zip(parts, ops + [""]) for x in pair).strip() + ")"
        if kind == 2:
            items = ", ".join(
                rng.choice([str(rng.randint(-3, 5)), rng.choice(names)]) for _ in range(3)
            )
            neg = rng.choice(["in", "not in"])
            return f"({arith(d - 1)} {neg} [{items}])"
        if kind == 3:
            return f"(not {boolean(d - 1)})"
        if kind == 4:
            return f"({arith(d - 1)})"  # numbers are truthy too
        op = rng.choice(["and", "or"])
        return f"({boolean(d - 1)} {op} {boolean(d - 1)})"

    return boolean(depth)


@pytest.fixture
def recorded() -> Path:
    return RECORDED


@pytest.fixture
def oracle() -> Callable[[str, Mapping[str, Any]], bool]:
    return python_holds


@pytest.fixture
def make_expression() -> Callable[..., str]:
    return random_expression


@pytest.fixture
def product() -> Callable[[Sequence[Parameter]], list[dict[str, Any]]]:
    return product_configs
