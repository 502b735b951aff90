"""Models of ``GET /v1/best``: the answer of a build-time lookup (``Answer.to_dict`` of
``ktune.tuner.lookup``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["AnswerOut", "QueryOut"]


class QueryOut(BaseModel):
    workload: str
    operator: str
    shape: list[int]
    dtype: str
    layout: str
    device: str


class AnswerOut(BaseModel):
    query: QueryOut
    tier: Literal[
        "exact", "nearest_shape", "similar_device", "similar_device_nearest_shape", "cost_model"
    ]
    workload: str = Field(description="The workload the config was tuned for.")
    device: str = Field(description="The device it was tuned on.")
    config: dict[str, Any]
    time_ms: float | None = Field(description="Measured for `workload` on `device`.")
    job: int | None = Field(
        description=(
            "The tuning job that measured the config; "
            "null when predicted or recorded outside any job (`ktune import` records a job)."
        )
    )
    trial: int | None = Field(
        description="Its position among the job's trials (the seq of /v1/jobs/{id}/trials)."
    )
    tuning: bool = Field(
        description=(
            "A job of `workload` on `device` is still queued or running: the answer may improve."
        )
    )
    distance: float = Field(description="0 when exact, else the shape or device distance.")
    updated_at: str | None
    validity: Literal["measured", "checked", "unchecked"] = Field(
        description=(
            "measured: tuned for this very workload; checked: the operator's requirements hold "
            "at the asked shape; unchecked: no rule of this operator is known (recorded space)."
        )
    )
    stale: bool = Field(
        description="Measured with an older kernel template or toolchain (allow_stale only)."
    )
    stale_reason: str
    confirmed: bool | None = Field(
        description="Its job re-measured it against the runner-ups; null: never re-measured."
    )
    noise_band: float | None = Field(description="Relative noise band of its runs.")
    flag: str = Field(description="unconfirmed: its re-measurement disagreed with the first.")
    notes: list[str] = Field(description="Tuned configs passed over, and why.")
