"""CPU kernels ktune tunes for real on machines without a GPU (C with OpenMP, see ``c/``).

``get(name)`` returns the CPU operator registered under ``name`` (``cpu_matmul``,
``cpu_conv2d``);
``names()`` lists them. Their names differ from the GPU operators', so a CPU's tuned configs
never answer a GPU kernel's lookup.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ktune.search_space.excerpt import excerpt

if TYPE_CHECKING:
    from ktune.search_space.operators.cpu.base import CpuLimits, CpuOperator, CSource

__all__ = ["CSource", "CpuLimits", "CpuOperator", "get", "names"]

# name -> "module:Class", imported on first use
REGISTRY: dict[str, str] = {
    "cpu_matmul": "ktune.search_space.operators.cpu.matmul:CpuMatmul",
    "cpu_conv2d": "ktune.search_space.operators.cpu.conv2d:CpuConv2d",
}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> CpuOperator:
    """The CPU operator called ``name``; :class:`OperatorError` naming the choices otherwise."""
    from ktune.search_space.operators.base import OperatorError, instantiate

    target = REGISTRY.get(name)
    if target is None:
        raise OperatorError(
            f"unknown CPU operator {excerpt(name)} (choose from: {', '.join(REGISTRY)})"
        )
    return instantiate(target)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    """The names of ``operators.cpu.base``, imported on first use (see ``operators``)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("ktune.search_space.operators.cpu.base"), name)
    globals()[name] = value
    return value
