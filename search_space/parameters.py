"""Typed tuning parameters: a name and the ordered list of values it may take."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ktune.search_space.excerpt import excerpt

Value = int | float | str | bool
Config = dict[str, Value]
Kind = Literal["int", "float", "str", "bool"]

__all__ = ["Config", "Kind", "Parameter", "ParameterError", "Value"]


class ParameterError(ValueError):
    """A parameter definition is unusable (empty, mixed types, duplicates)."""


def _kind_of(value: Value) -> Kind:
    # bool is a subclass of int: test it first.
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    raise ParameterError(f"unsupported value {excerpt(value)} of type {type(value).__name__}")


@dataclass(frozen=True)
class Parameter:
    """One tuning knob. The order of ``values`` is the order neighbours step through."""

    name: str
    values: tuple[Value, ...]
    kind: Kind = field(default="int")
    default: Value | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ParameterError(f"parameter name {excerpt(self.name)} is not an identifier")
        if not self.values:
            raise ParameterError(f"parameter {excerpt(self.name)} has no values")
        for value in self.values:
            if isinstance(value, float) and not math.isfinite(value):
                # NaN equals nothing (its config could never be found); neither has a C literal
                raise ParameterError(
                    f"parameter {excerpt(self.name)}: value {excerpt(value)} is not a finite number"
                )
        if len(set(self.values)) != len(self.values):
            raise ParameterError(f"parameter {excerpt(self.name)} lists a value twice")
        kinds = {_kind_of(v) for v in self.values}
        if kinds == {"int", "float"}:
            object.__setattr__(self, "values", tuple(float(v) for v in self.values))
            kinds = {"float"}
        if len(kinds) != 1:
            raise ParameterError(
                f"parameter {excerpt(self.name)} mixes value types {sorted(kinds)}"
            )
        object.__setattr__(self, "kind", kinds.pop())
        if self.default is not None and self.default not in self.values:
            object.__setattr__(self, "default", None)

    @classmethod
    def of(cls, name: str, values: Sequence[Value], default: Value | None = None) -> Parameter:
        """Build a parameter, inferring its kind from the values."""
        return cls(name=name, values=tuple(values), default=default)

    def __len__(self) -> int:
        return len(self.values)

    def position(self, value: Value) -> int:
        """Index of ``value`` in the value list; ``ValueError`` when absent."""
        return self.values.index(value)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "values": list(self.values),
            "default": self.default,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Parameter:
        values = data["values"]
        if not isinstance(values, list):
            raise ParameterError(f"parameter {excerpt(data.get('name'))}: values must be a list")
        return cls.of(str(data["name"]), values, data.get("default"))  # type: ignore[arg-type]
