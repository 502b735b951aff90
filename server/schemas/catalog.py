"""Models of ``/v1/devices``, ``/v1/spaces``, ``/v1/operators`` and ``/v1/strategies``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "DeviceOut",
    "DevicePage",
    "OperatorOut",
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


class OperatorOut(BaseModel):
    """An operator ``POST /v1/jobs`` may name, and whether this server takes its jobs now."""

    name: str
    device: str = Field(
        description="gpu (measured on the Ray cluster's GPUs) or cpu (on a runner's CPU)"
    )
    summary: str
    shape: str = Field(description="how the job's shape is written, e.g. MxNxK")
    dtypes: list[str]
    layouts: list[str] = Field(description="the first is the default; an empty string: none")
    available: bool = Field(description="this server accepts jobs of the operator")
    reason: str | None = Field(None, description="why it does not, when it does not")


class StrategyOut(BaseModel):
    name: str
    summary: str
    default: bool = Field(False, description="the strategy a job gets when it names none")
