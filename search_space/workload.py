"""Workload identity: operator + problem shape + dtype (+ layout), with a canonical key."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_DIM", "Workload", "WorkloadError"]

#: the largest size of a shape's dimension: 2^53 - 1, exact in a double and in JSON readers
#: that use one (JavaScript's), and within C's ``long long`` of the generated headers
MAX_DIM = 2**53 - 1

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class WorkloadError(ValueError):
    """A workload key or field is malformed."""


@dataclass(frozen=True)
class Workload:
    """What is being tuned. ``key`` is stable, so a compiler can build it from its own IR.

    Key format: ``operator/d0xd1x.../dtype[/layout]``; an empty dtype is written as ``-``
    (recorded Kernel Tuner spaces do not state their dtype).
    """

    operator: str
    shape: tuple[int, ...]
    dtype: str = ""
    layout: str = ""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.operator):
            raise WorkloadError(f"operator name {self.operator!r} is not a valid name")
        if not self.shape or any((not isinstance(d, int)) or d <= 0 for d in self.shape):
            raise WorkloadError(f"shape {self.shape!r} must be a non-empty tuple of positive ints")
        if any(d > MAX_DIM for d in self.shape):
            raise WorkloadError(f"shape {self.shape!r}: sizes must be at most {MAX_DIM}")
        for label, text in (("dtype", self.dtype), ("layout", self.layout)):
            if text and not _NAME.fullmatch(text):
                raise WorkloadError(f"{label} {text!r} is not a valid name")

    @property
    def key(self) -> str:
        parts = [self.operator, "x".join(str(d) for d in self.shape), self.dtype or "-"]
        if self.layout:
            parts.append(self.layout)
        return "/".join(parts)

    @classmethod
    def from_key(cls, key: str) -> Workload:
        parts = key.split("/")
        if len(parts) not in (3, 4):
            raise WorkloadError(f"workload key {key!r} is not operator/shape/dtype[/layout]")
        dims = parts[1].split("x")
        if not all(d.isascii() and d.isdigit() and len(d) <= len(str(MAX_DIM)) for d in dims):
            raise WorkloadError(
                f"workload key {key[:200]!r}: shape {parts[1][:100]!r} is not like 64x64"
            )
        shape = tuple(int(d) for d in dims)
        dtype = "" if parts[2] == "-" else parts[2]
        return cls(parts[0], shape, dtype, parts[3] if len(parts) == 4 else "")

    def __str__(self) -> str:
        return self.key
