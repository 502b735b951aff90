"""Import of T1 specs: the JSON search-space description of the auto-tuning benchmark hub.

A T1 spec states the tuning parameters (``Values`` is a Python list literal in a string),
restriction expressions (``Conditions``) and the kernel (name, problem size, compiler options).
Only the parts ktune uses are validated; the whole document is kept in :attr:`T1Spec.raw`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktune.search_space.constraints import ConstraintError
from ktune.search_space.excerpt import excerpt
from ktune.search_space.formats.errors import FormatError
from ktune.search_space.formats.numbers import finite_float
from ktune.search_space.formats.reading import read_stored
from ktune.search_space.parameters import Parameter, ParameterError
from ktune.search_space.space import SearchSpace, SpaceError

__all__ = ["T1Spec", "load_t1", "spec_from_dict"]

_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "string": (str,),
    "bool": (bool,),
}


@dataclass(frozen=True)
class T1Spec:
    """A loaded T1 spec."""

    name: str
    kernel_name: str
    problem_size: tuple[int, ...]
    space: SearchSpace
    compiler_options: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def load_t1(path: str | Path, max_bytes: int | None = None) -> T1Spec:
    """Read the T1 spec at ``path`` (a regular file of at most ``max_bytes``: see
    ``reading.read_stored``); :class:`FormatError` when it is not one."""
    path = Path(path)
    try:
        text = read_stored(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: cannot be read ({type(e).__name__})") from None
    too_deep = FormatError(f"{path}: not a T1 spec (the JSON is nested too deeply)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})"
        ) from None
    except RecursionError:  # JSON nested deeper than Python's recursion limit
        raise too_deep from None
    except ValueError:  # not a JSONDecodeError: an int over Python's int_max_str_digits
        raise FormatError(f"{path}: not a T1 spec (an integer has too many digits)") from None
    try:
        return spec_from_dict(data, source=str(path))
    except RecursionError:  # a value that parsed just below the limit, then went deeper
        raise too_deep from None


def spec_from_dict(data: Any, *, source: str = "<T1 spec>") -> T1Spec:
    """Build a :class:`T1Spec` from a parsed document; ``source`` names it in errors."""

    def fail(problem: str) -> FormatError:
        return FormatError(f"{source}: {problem}")

    if not isinstance(data, dict):
        raise fail("not a T1 spec (the document is not a JSON object)")
    cspace = data.get("ConfigurationSpace")
    if not isinstance(cspace, dict):
        raise fail("missing ConfigurationSpace")
    tuning = cspace.get("TuningParameters")
    if not isinstance(tuning, list) or not tuning:
        raise fail("ConfigurationSpace.TuningParameters is missing or empty")
    parameters = [_parameter(entry, i, fail) for i, entry in enumerate(tuning)]
    conditions = cspace.get("Conditions", []) or []
    if not isinstance(conditions, list):
        raise fail("ConfigurationSpace.Conditions is not a list")
    expressions = []
    for i, cond in enumerate(conditions):
        expr = cond.get("Expression") if isinstance(cond, dict) else None
        if not isinstance(expr, str):
            raise fail(f"Conditions[{i}] has no Expression string")
        expressions.append(expr)
    general = _section(data, "General")
    kernel = _section(data, "KernelSpecification")
    name = str(general.get("BenchmarkName") or kernel.get("BenchmarkName") or "")
    problem_size = kernel.get("ProblemSize", [])
    if not isinstance(problem_size, list) or not all(_is_int(d) for d in problem_size):
        raise fail(f"KernelSpecification.ProblemSize {excerpt(problem_size)} is not a list of ints")
    options = kernel.get("CompilerOptions", []) or []
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise fail("KernelSpecification.CompilerOptions is not a list of strings")
    try:
        space = SearchSpace(parameters, expressions, name=name)
    except (ConstraintError, SpaceError) as e:
        raise fail(str(e)) from None
    return T1Spec(
        name=name,
        kernel_name=str(kernel.get("KernelName", "")),
        problem_size=tuple(problem_size),
        space=space,
        compiler_options=tuple(options),
        raw=data,
    )


def _parameter(entry: Any, i: int, fail: Any) -> Parameter:
    if not isinstance(entry, dict) or not isinstance(entry.get("Name"), str):
        raise fail(f"TuningParameters[{i}] has no Name")
    name = entry["Name"]
    kind = entry.get("Type", "int")
    if kind not in _TYPES:
        raise fail(
            f"parameter {excerpt(name)}: unknown Type {excerpt(kind)} (int, float, string, bool)"
        )
    text = entry.get("Values")
    try:
        values = ast.literal_eval(text) if isinstance(text, str) else text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise fail(
            f"parameter {excerpt(name)}: Values {excerpt(text)} is not a list literal"
        ) from None
    if not isinstance(values, list) or not values:
        raise fail(f"parameter {excerpt(name)}: Values {excerpt(text)} is not a non-empty list")
    allowed = _TYPES[kind]
    if any(not isinstance(v, allowed) or (isinstance(v, bool) and kind != "bool") for v in values):
        raise fail(f"parameter {excerpt(name)}: Values {excerpt(text)} are not all of Type {kind}")
    if kind == "float":
        values = [finite_float(v) for v in values]
        if (
            None in values
        ):  # Parameter rejects NaN and inf; this catches ints beyond the float range
            raise fail(
                f"parameter {excerpt(name)}: Values {excerpt(text)} are not all finite numbers"
            )
    try:
        return Parameter.of(name, values, entry.get("Default"))
    except ParameterError as e:
        raise fail(f"parameter {excerpt(name)}: {e}") from None


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
