"""Operators: kernel templates with their spaces, launch geometry, inputs and references.

``get(name)`` returns the operator registered under ``name`` (``matmul``, ``conv2d``,
``reduction``, ``softmax``, ``transpose``); ``names()`` lists them. A user's own kernel is a
:class:`~search_space.operators.custom.CustomOperator`, built from Python or a T1 spec.
"""

from __future__ import annotations

from ktune.search_space.operators.base import (
    Arguments,
    DeviceLimits,
    KernelSource,
    Launch,
    Operator,
    OperatorError,
    Tolerance,
    instantiate,
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
    target = REGISTRY.get(name)
    if target is None:
        from ktune.search_space.operators import cpu

        raise OperatorError(
            f"unknown operator {name!r} (choose from: {', '.join(REGISTRY)}; "
            f"on the CPU: {', '.join(cpu.names())})"
        )
    return instantiate(target)  # type: ignore[no-any-return]
