"""Workload identity: operator + problem shape + dtype (+ layout), with a canonical key."""

from __future__ import annotations

import operator as _operator
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ktune.search_space.excerpt import excerpt

__all__ = ["MAX_DIM", "MAX_RANK", "Workload", "WorkloadError", "parse_shape"]

#: the largest size of a shape's dimension: 2^53 - 1, exact in a double and in JSON readers
#: that use one (JavaScript's), and within C's ``long long`` of the generated headers
MAX_DIM = 2**53 - 1

#: the most dimensions a shape may have (a convolution's full form has 13)
MAX_RANK = 16

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_SEPARATOR = re.compile(r"\s*[xX,]\s*")


class WorkloadError(ValueError):
    """A workload key or field is malformed."""


def parse_shape(shape: str | Sequence[int]) -> tuple[int, ...]:
    """The one shape grammar of every command and the REST API.

    Text is sizes joined by ``x`` or ``,`` (spaces around them allowed): ``4096x4096``,
    ``4096, 4096``. A sequence of integers (numpy's too, not ``bool``) is taken as is. Each
    size is an ASCII integer from 0 to :data:`MAX_DIM` (whether 0 is allowed, e.g. a
    convolution's padding, is the operator's to judge; a :class:`Workload` takes positive sizes
    only), and there are 1 to :data:`MAX_RANK` of them. Anything else is a
    :class:`WorkloadError` that quotes the shape.
    """
    if isinstance(shape, str):
        text = shape.strip()
        parts = _SEPARATOR.split(text) if text else []
        # ASCII digits only (not "²" nor Arabic-Indic digits), and bounded before int().
        if not parts or not all(p.isascii() and p.isdigit() for p in parts):
            raise WorkloadError(
                f"shape {excerpt(shape)} is not like 4096x4096 (sizes joined by x or ,)"
            )
        if any(len(p.lstrip("0")) > len(str(MAX_DIM)) for p in parts):
            raise WorkloadError(f"shape {excerpt(shape)}: sizes must be at most {MAX_DIM}")
        dims = tuple(int(p) for p in parts)
    else:
        try:
            if isinstance(shape, bool) or any(isinstance(d, bool) for d in shape):
                raise TypeError("True is not a size")
            dims = tuple(_operator.index(d) for d in shape)
        except TypeError:
            raise WorkloadError(f"shape {excerpt(shape)} must be a list of integers") from None
        if any(d < 0 for d in dims):
            raise WorkloadError(f"shape {list(dims)}: sizes must not be negative")
    if not 1 <= len(dims) <= MAX_RANK:
        raise WorkloadError(f"shape {list(dims)} must have 1 to {MAX_RANK} sizes")
    if any(d > MAX_DIM for d in dims):
        raise WorkloadError(f"shape {list(dims)}: sizes must be at most {MAX_DIM}")
    return dims


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
            raise WorkloadError(f"operator name {excerpt(self.operator)} is not a valid name")
        if not self.shape or any((not isinstance(d, int)) or d <= 0 for d in self.shape):
            raise WorkloadError(f"shape {self.shape!r} must be a non-empty tuple of positive ints")
        if any(d > MAX_DIM for d in self.shape):
            raise WorkloadError(f"shape {self.shape!r}: sizes must be at most {MAX_DIM}")
        for label, text in (("dtype", self.dtype), ("layout", self.layout)):
            if text and not _NAME.fullmatch(text):
                raise WorkloadError(f"{label} {excerpt(text)} is not a valid name")

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
            raise WorkloadError(f"workload key {excerpt(key)} is not operator/shape/dtype[/layout]")
        dims = parts[1].split("x")
        if not all(d.isascii() and d.isdigit() and len(d) <= len(str(MAX_DIM)) for d in dims):
            raise WorkloadError(
                f"workload key {excerpt(key)}: shape {excerpt(parts[1])} is not like 64x64"
            )
        shape = tuple(int(d) for d in dims)
        dtype = "" if parts[2] == "-" else parts[2]
        return cls(parts[0], shape, dtype, parts[3] if len(parts) == 4 else "")

    def __str__(self) -> str:
        return self.key
