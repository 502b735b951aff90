"""Models of ``/v1/devices``, ``/v1/spaces`` and ``/v1/strategies``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "DeviceOut",
    "DevicePage",
    "ParameterOut",
    "RecordingOut",
    "SpacesOut",
    "StrategyOut",
    "WorkloadOut",
]


class DeviceOut(BaseModel):
    name: str
    vendor: str
    architecture: str
    spec: dict[str, Any] | None


class DevicePage(BaseModel):
    items: list[DeviceOut]


class ParameterOut(BaseModel):
    name: str
    values: list[Any]


class RecordingOut(BaseModel):
    """A recorded space jobs can use: its name is what ``POST /v1/jobs`` takes as ``space``."""

    name: str
    kernel: str
    device: str
    workload: str
    configs: int
    optimum_ms: float | None
    bundled: bool
    parameters: list[ParameterOut]


class WorkloadOut(BaseModel):
    key: str
    operator: str
    shape: list[int]
    dtype: str
    layout: str
    parameters: list[ParameterOut]


class SpacesOut(BaseModel):
    recordings: list[RecordingOut]
    workloads: list[WorkloadOut]


class StrategyOut(BaseModel):
    name: str
    summary: str
    default: bool = Field(False, description="the strategy a job gets when it names none")
