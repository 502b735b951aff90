"""Integer expressions: Python's value and the C text (compiled with the system C compiler) agree,
floor division and modulo of negative numbers included; what is not allowed is refused."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from ktune.search_space.operators import OperatorError, get
from ktune.search_space.operators.expressions import C_HELPERS, int_expr


def _random_expression(rng: random.Random, depth: int = 3) -> str:
    names = ["a", "b", "c", "knob"]
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(names) if rng.random() < 0.6 else str(rng.randint(-9, 9))
    kind = rng.randrange(7)
    x, y = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    if kind <= 2:
        return f"({x} {rng.choice(['+', '-', '*', '//', '%'])} {y})"
    if kind == 3:
        return f"{rng.choice(['min', 'max'])}({x}, {y}, {_random_expression(rng, 0)})"
    if kind == 4:
        return f"({x} if {x} {rng.choice(['<', '>=', '=='])} {y} else {y})"
    if kind == 5:
        return f"({x} <= {y} < 7 and not {y} or {x} != 2)"
    return f"(-{x})"


def test_python_and_c_agree(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    rng = random.Random(4)
    cases = []
    while len(cases) < 300:
        text = _random_expression(rng)
        env = {n: rng.randint(-20, 20) for n in ("a", "b", "c", "knob")}
        try:
            value = int_expr(text).value(env)
        except OperatorError:  # division by zero somewhere: C would be undefined too
            continue
        cases.append((text, env, value))
    lines = ["#include <stdint.h>", "#include <stdio.h>", C_HELPERS, "int main(void) {"]
    for text, env, _ in cases:
        decl = " ".join(f"int64_t {n} = {env[n]};" for n in ("a", "b", "c"))
        lines.append(f"{{ {decl} (void)a; (void)b; (void)c;")
        c_text = int_expr(text).c({"knob": env["knob"]}, {"a", "b", "c"})
        lines.append(f'printf("%lld\\n", (long long)({c_text})); }}')
    lines.append("return 0; }")
    src = tmp_path / "exprs.c"
    src.write_text("\n".join(lines))
    subprocess.run([cc, "-O1", "-o", str(tmp_path / "exprs"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "exprs")], capture_output=True, text=True, check=True)
    got = [int(v) for v in out.stdout.split()]
    assert got == [v for _, _, v in cases]


def test_geometry_expressions_agree_with_the_launch() -> None:
    """The conv operator's derived sizes are its ConvShape's P and Q (floor division)."""
    op = get("conv2d")
    workload = op.workload("1x1x3x3x1x5x5x1x1x1x1x1x1", "float32", "NCHW")
    sizes = op.sizes(workload)
    assert (sizes["P"], sizes["Q"]) == (1, 1)


@pytest.mark.parametrize(
    "text",
    ["a / b", "a ** 2", "f(a)", "a.b", "1.5 + a", "min(a)", "'x'", "a[0]", "a << 1", "[a]"],
)
def test_what_is_not_allowed_is_refused(text: str) -> None:
    with pytest.raises(OperatorError, match="expression"):
        int_expr(text)


def test_names_must_be_known_when_written_as_c() -> None:
    expr = int_expr("(M + tile - 1) // tile")
    assert expr.names == {"M", "tile"}
    assert expr.value({"M": 65, "tile": 32}) == 3
    assert "INT64_C(32)" in expr.c({"tile": 32}, {"M"})
    with pytest.raises(OperatorError, match="neither a knob nor a size"):
        expr.c({}, {"M"})
    with pytest.raises(OperatorError, match="no value for 'tile'"):
        expr.value({"M": 1})
