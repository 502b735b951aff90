"""Every operator ktune can tune, GPU and CPU, described for a user choosing one."""

from __future__ import annotations

from dataclasses import dataclass

from ktune.search_space.operators import cpu
from ktune.search_space.operators import get as get_gpu
from ktune.search_space.operators import names as gpu_names
from ktune.search_space.operators.base import ShapedOperator

__all__ = ["OperatorInfo", "all_operators"]


@dataclass(frozen=True)
class OperatorInfo:
    """An operator's name, where it runs (``gpu`` or ``cpu``), what it computes, and the
    workloads it takes: how a shape is written, dtypes and layouts (the first is the default)."""

    name: str
    device: str
    summary: str
    shape: str
    dtypes: tuple[str, ...]
    layouts: tuple[str, ...]

    @classmethod
    def of(cls, op: ShapedOperator, device: str) -> OperatorInfo:
        return cls(op.name, device, op.summary, op.shape_form, tuple(op.dtypes), tuple(op.layouts))


def all_operators() -> list[OperatorInfo]:
    """The GPU operators, then the CPU ones, in registry order."""
    return [OperatorInfo.of(get_gpu(n), "gpu") for n in gpu_names()] + [
        OperatorInfo.of(cpu.get(n), "cpu") for n in cpu.names()
    ]
