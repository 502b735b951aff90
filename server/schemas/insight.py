"""Models of the endpoints that explain jobs: importance, work, facets, comparison bands."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ktune.server.schemas.jobs import JobState

__all__ = [
    "BandOut",
    "CompareJob",
    "CompareOut",
    "FacetsOut",
    "ImportanceOut",
    "KnobOut",
    "ValueOut",
    "WorkOut",
]


class ValueOut(BaseModel):
    value: Any
    n: int = Field(description="Trials with this value, any status.")
    n_ok: int = Field(description="Of them, measured ok.")
    geomean_ms: float | None = Field(description="Geometric mean time of the ok ones.")
    best_ms: float | None


class KnobOut(BaseModel):
    name: str
    importance: float | None = Field(
        description="Share of the variance of log(time) this knob explains alone, 0 to 1; "
        "null when fewer than 3 ok trials or no spread in time."
    )
    values: list[ValueOut] = Field(description="The knob's values, ascending.")


class ImportanceOut(BaseModel):
    job: int
    method: str = Field(description="How the importances were computed.")
    n_trials: int
    n_ok: int
    knobs: list[KnobOut] = Field(description="Most important first.")


class WorkOut(BaseModel):
    job: int
    workload: str
    operator: str
    flops: float | None = Field(description="Floating-point operations of one run; null: unknown.")
    bytes: float | None = Field(description="Compulsory DRAM bytes of one run; null: unknown.")
    reason: str = Field(description="Why the work is unknown, when it is.")
    best_gflops: float | None = Field(description="flops / best time, in GFLOP/s.")
    best_gbps: float | None = Field(description="bytes / best time, in GB/s.")
    peak_gflops: float | None = Field(
        None, description="The device's peak GFLOP/s for the dtype; null: unknown."
    )
    peak_gbps: float | None = Field(
        None, description="The device's peak memory bandwidth, GB/s; null: unknown."
    )
    peak_reason: str = Field("", description="Why a peak is unknown, when one is.")


class FacetsOut(BaseModel):
    total: int = Field(description="Jobs matching every filter given, state included.")
    by_state: dict[JobState, int] = Field(
        description="Jobs matching the filters other than state, by state."
    )
    workloads: list[str]
    devices: list[str]
    strategies: list[str]
    backends: list[str]


class CompareJob(BaseModel):
    id: int
    strategy: str
    seed: int | None
    state: JobState
    workload: str
    device: str
    n_trials: int
    best_time_ms: float | None
    reference_ms: float | None = Field(description="What the job's times are divided by.")
    best: float | None = Field(description="best_time_ms / reference_ms (or ms unnormalised).")


class BandOut(BaseModel):
    strategy: str
    jobs: list[int]
    x: list[float]
    median: list[float | None]
    q25: list[float | None]
    q75: list[float | None]
    n: list[int] = Field(description="Jobs with a best-so-far at each x.")


class CompareOut(BaseModel):
    axis: Literal["measurements", "time"]
    normalised: bool
    reference: Literal["optimum", "best known", "none"] = Field(
        description="optimum: each job's recorded space's fastest time; best known: the fastest "
        "ok trial of the compared jobs on the same workload and device; none: milliseconds."
    )
    jobs: list[CompareJob]
    bands: list[BandOut]
