"""CPU kernels ktune tunes for real on machines without a GPU (C with OpenMP, see ``c/``).

``get(name)`` returns the host operator registered under ``name`` (``cpu_matmul``,
``cpu_conv2d``);
``names()`` lists them. Their names differ from the GPU operators', so a CPU's tuned configs
never answer a GPU kernel's lookup.
"""

from __future__ import annotations

from search_space.operators.base import OperatorError, instantiate
from search_space.operators.host.base import CSource, HostLimits, HostOperator

__all__ = ["CSource", "HostLimits", "HostOperator", "get", "names"]

# name -> "module:Class", imported on first use
REGISTRY: dict[str, str] = {
    "cpu_matmul": "search_space.operators.host.matmul:CpuMatmul",
    "cpu_conv2d": "search_space.operators.host.conv2d:CpuConv2d",
}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> HostOperator:
    """The host operator called ``name``; :class:`OperatorError` naming the choices otherwise."""
    target = REGISTRY.get(name)
    if target is None:
        raise OperatorError(f"unknown CPU operator {name!r} (choose from: {', '.join(REGISTRY)})")
    return instantiate(target)  # type: ignore[no-any-return]
