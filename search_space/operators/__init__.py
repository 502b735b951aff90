"""Operators: kernel templates with their spaces, launch geometry, inputs and references.

``get(name)`` returns the operator registered under ``name`` (``matmul``, ``conv2d``,
``reduction``, ``softmax``, ``transpose``); ``names()`` lists them. A user's own kernel is a
:class:`~ktune.search_space.operators.custom.CustomOperator`, built from Python or a T1 spec.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ktune.search_space.excerpt import excerpt

if TYPE_CHECKING:
    from ktune.search_space.operators.base import (
        Arguments,
        DeviceLimits,
        KernelSource,
        Launch,
        Operator,
        OperatorError,
        Tolerance,
        shape_of,
    )

__all__ = [
    "Arguments",
    "DeviceLimits",
    "KernelSource",
    "Launch",
    "Operator",
    "OperatorError",
    "Tolerance",
    "get",
    "names",
    "shape_of",
]

# name -> "module:Class", imported on first use
REGISTRY: dict[str, str] = {
    "matmul": "ktune.search_space.operators.matmul:Matmul",
    "conv2d": "ktune.search_space.operators.conv2d:Conv2d",
    "reduction": "ktune.search_space.operators.reduction:Reduction",
    "softmax": "ktune.search_space.operators.softmax:Softmax",
    "transpose": "ktune.search_space.operators.transpose:Transpose",
}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Operator:
    """The operator called ``name``; :class:`OperatorError` naming the choices otherwise."""
    from ktune.search_space.operators.base import OperatorError, instantiate

    target = REGISTRY.get(name)
    if target is None:
        from ktune.search_space.operators import cpu

        raise OperatorError(
            f"unknown operator {excerpt(name)} (choose from: {', '.join(REGISTRY)}; "
            f"on the CPU: {', '.join(cpu.names())})"
        )
    return instantiate(target)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    """The names of ``operators.base`` re-exported here, imported on first use: the registry's
    names are known without loading numpy (a build-time lookup asks only them)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("ktune.search_space.operators.base"), name)
    globals()[name] = value
    return value
