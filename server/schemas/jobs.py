"""Models of ``/v1/jobs``: the job request, a job, pages of jobs and of trials."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from ktune.tuner import strategies
from ktune.tuner.bounds import (
    MAX_BATCH,
    MAX_CONFIRM,
    MAX_KERNEL_SOURCE_BYTES,
    MAX_KERNEL_SPEC_BYTES,
    MAX_RAY_WORKERS,
    MAX_REPLAY_SPEED,
    MAX_REUSE_WINDOW_S,
    MAX_SEED,
    MAX_TRIALS,
    MIN_REPLAY_SPEED,
)

__all__ = [
    "BudgetIn",
    "BudgetOut",
    "JobCreate",
    "JobOut",
    "JobPage",
    "JobState",
    "KernelIn",
    "SpaceRef",
    "TrialOut",
    "TrialPage",
    "TrialStatus",
]

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
TrialStatus = Literal["ok", "compile_error", "runtime_error", "wrong_result", "timeout", "invalid"]
Constraint = Annotated[str, StringConstraints(min_length=1, max_length=500)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no "5" for 5, no true for 1


class BudgetIn(_Strict):
    """When the job stops; give ``trials`` or ``seconds`` (or both)."""

    trials: int | None = Field(None, gt=0, le=MAX_TRIALS, description="Maximum measurements.")
    seconds: float | None = Field(
        None,
        gt=0,
        le=30 * 86400,
        allow_inf_nan=False,
        description="Maximum tuning time (replayed GPU time for recordings).",
    )
    target_ms: float | None = Field(
        None, gt=0, le=1e9, allow_inf_nan=False, description="Stop once a config is this fast."
    )
    patience: int | None = Field(
        None,
        gt=0,
        le=MAX_TRIALS,
        description="Stop after this many measurements without a new best.",
    )

    @model_validator(mode="after")
    def _bounded(self) -> BudgetIn:
        if self.trials is None and self.seconds is None:
            raise ValueError("give trials or seconds: a service job needs a bound")
        return self


class KernelIn(_Strict):
    """A user's own kernel: a T1 spec (as Kernel Tuner writes one; ``KernelSpecification.
    Language`` ``C`` runs on a runner's CPU, ``CUDA`` on the Ray cluster's GPUs) and the text of
    its kernel file. The server stores both with the job and never compiles or runs them: a
    runner that takes the job's backend does."""

    spec: dict[str, Any] = Field(
        description=f"The T1 spec (a JSON object of at most {MAX_KERNEL_SPEC_BYTES} bytes)."
    )
    source: str = Field(
        min_length=1,
        max_length=MAX_KERNEL_SOURCE_BYTES,
        description=f"The kernel's source (at most {MAX_KERNEL_SOURCE_BYTES} bytes of UTF-8).",
    )

    @model_validator(mode="after")
    def _bounded(self) -> KernelIn:
        if len(self.source.encode()) > MAX_KERNEL_SOURCE_BYTES:
            raise ValueError(f"the kernel source is over {MAX_KERNEL_SOURCE_BYTES} bytes")
        if len(json.dumps(self.spec)) > MAX_KERNEL_SPEC_BYTES:
            raise ValueError(f"the T1 spec is over {MAX_KERNEL_SPEC_BYTES} bytes")
        return self


class JobCreate(_Strict):
    """A tuning job: on a recorded space (``space``: the bundled ones and those of
    KTUNE_RECORDINGS_DIR, replayed), of an operator measured on GPUs of the server's Ray
    cluster (``operator`` and ``shape``; the server needs KTUNE_RAY_ADDRESS), or of a CPU
    operator (``cpu_matmul``, ``cpu_conv2d``) measured on the CPU of a runner that takes
    ``cpu`` jobs."""

    space: str | None = Field(
        None, min_length=1, max_length=128, description="Name of a recorded space (GET /v1/spaces)."
    )
    kernel: KernelIn | None = Field(
        None, description="Your own kernel (a T1 spec and its source), instead of an operator."
    )
    operator: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description=(
            "Operator to tune on the Ray cluster's GPUs "
            "(matmul, conv2d, reduction, softmax, transpose), "
            "or on a runner's CPU (cpu_matmul, cpu_conv2d)."
        ),
    )
    shape: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Problem shape of the operator, e.g. 4096x4096x4096.",
    )
    dtype: str = Field(
        "float32",
        min_length=1,
        max_length=16,
        description=(
            "Data type of the operator: float32 or float16 (GPU), float32 or float64 (CPU)."
        ),
    )
    layout: str = Field(
        "",
        max_length=16,
        description="Layout of the operator: NCHW/NHWC (conv2d), sum/max (reduction).",
    )
    gpu_type: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description=(
            "Ray accelerator type the operator is measured on (H100, A100, ...); "
            "any GPU when absent."
        ),
    )
    gpu_workers: int = Field(
        1, ge=1, le=MAX_RAY_WORKERS, description="GPUs measuring the operator's batches at once."
    )
    device: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Device to tune for; must be the one the space was recorded on.",
    )
    strategy: str = Field(strategies.DEFAULT, min_length=1, max_length=64)
    budget: BudgetIn
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    batch_size: int = Field(1, ge=1, le=MAX_BATCH)
    reuse_window_s: float | None = Field(
        None,
        ge=0,
        le=MAX_REUSE_WINDOW_S,
        allow_inf_nan=False,
        description=(
            "Reuse the log's trials of this workload, device and toolchain up to this many "
            "seconds old instead of measuring them (default 30 days; 0: measure everything)."
        ),
    )
    confirm: int | None = Field(
        None,
        ge=0,
        le=MAX_CONFIRM,
        description=(
            "Top configs re-measured in 3 interleaved rounds before the job ends "
            "(default 3, none for a replayed space; 0: none)."
        ),
    )
    constraints: list[Constraint] = Field(
        default_factory=list,
        max_length=16,
        description="Extra constraints, e.g. 'block_size_x*block_size_y <= 512'.",
    )
    replay_speed: float | None = Field(
        None,
        ge=MIN_REPLAY_SPEED,
        le=MAX_REPLAY_SPEED,
        allow_inf_nan=False,
        description=(
            "Spend the recorded GPU time in real time, this many times faster (1 = as on the GPU)."
        ),
    )

    @model_validator(mode="after")
    def _one_kind(self) -> JobCreate:
        if sum(x is not None for x in (self.space, self.operator, self.kernel)) != 1:
            raise ValueError(
                "give one of space (a recorded space, replayed), operator and shape "
                "(measured on GPUs or a CPU) or kernel (your own: a T1 spec and its source)"
            )
        if self.kernel is not None:
            given = [
                name
                for name in ("shape", "device", "replay_speed")
                if getattr(self, name) is not None
            ]
            given += [name for name in ("dtype", "layout") if name in self.model_fields_set]
            if given:
                raise ValueError(
                    f"{', '.join(given)} go(es) with a recorded space or an operator: "
                    "a kernel's spec names its problem size and types"
                )
            return self
        if self.space is not None:
            given = [name for name in ("shape", "gpu_type") if getattr(self, name) is not None]
            given += [
                name for name in ("dtype", "layout", "gpu_workers") if name in self.model_fields_set
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)} go(es) with operator, not with a recorded space"
                )
        else:
            if self.shape is None:
                raise ValueError("an operator job needs a shape, e.g. 4096x4096x4096")
            given = [name for name in ("device", "replay_speed") if getattr(self, name) is not None]
            if given:
                raise ValueError(
                    f"{', '.join(given)} go(es) with a recorded space; "
                    "an operator job's GPU is the one "
                    "the Ray cluster gives (name its kind with gpu_type)"
                )
        return self


class BudgetOut(BaseModel):
    trials: int | None
    seconds: float | None
    target_ms: float | None
    patience: int | None


class SpaceRef(BaseModel):
    """The recorded space of a job, when the server's catalog has it."""

    name: str
    configs: int
    optimum_ms: float | None = Field(description="Fastest time in the whole recording.")


class JobOut(BaseModel):
    id: int
    state: JobState
    workload: str
    device: str
    backend: str
    strategy: str
    seed: int | None
    batch_size: int
    budget: BudgetOut
    constraints: list[str] = Field(description="The job's constraints beyond its space's own.")
    replay_speed: float | None = Field(
        description="Replayed GPU time spent this many times faster; null: at once."
    )
    gpu_type: str | None = Field(
        description=(
            "Ray accelerator type a job on the Ray cluster runs on; null: any, or not on Ray."
        )
    )
    gpu_workers: int | None = Field(
        description="GPUs of the Ray cluster measuring at once; null: not on Ray."
    )
    reuse_window_s: float | None = Field(
        None, description="How old a logged trial may be to be reused; null: the default."
    )
    confirm: int | None = Field(
        None, description="Top configs re-measured before the job ends; null: the default."
    )
    n_trials: int
    progress: float | None = Field(description="Share of the budget spent, 0 to 1.")
    best_time_ms: float | None
    best_trial: int | None = Field(
        description=(
            "Position of the best trial among the job's trials (the seq of /v1/jobs/{id}/trials)."
        )
    )
    best_config: dict[str, Any] | None
    clock_s: float = Field(description="Tuning time spent (replayed GPU time for recordings).")
    space: SpaceRef | None
    error: str
    warning: str = Field(
        "", description="Why its answer may not be trusted: a machine too noisy to tune on."
    )
    cancel_requested: bool
    runner: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None


class JobPage(BaseModel):
    items: list[JobOut]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last.")


class TrialOut(BaseModel):
    seq: int | None
    config: dict[str, Any]
    status: TrialStatus
    time_ms: float | None
    times_ms: list[float] = Field(
        description="Every repeated run's time; time_ms is their median. Empty: not recorded."
    )
    compile_ms: float
    bench_ms: float
    clock_s: float
    predicted: float | None
    strategy: str
    error: str
    spread: float | None = Field(
        None, description="Relative interquartile range of times_ms (null: under two runs)."
    )
    reused_from: int | None = Field(
        None, description="The log's trial whose measurement this one reuses (not measured)."
    )
    confirmed_ms: float | None = Field(
        None, description="Median of all its runs when its job re-measured it before ending."
    )
    noise_band: float | None = None
    flag: str = Field("", description="unconfirmed: its re-measurement disagreed.")
    gflops: float | None = Field(
        None, description="The operator's FLOPs / time_ms, in GFLOP/s (null: work unknown)."
    )
    gbps: float | None = Field(
        None, description="The operator's compulsory DRAM bytes / time_ms, in GB/s."
    )
    peak_flops_fraction: float | None = Field(
        None,
        description=(
            "gflops / the device's peak FLOP/s for the dtype (its spec or ktune's catalog); "
            "null where the peak is unknown (CPUs, float64)."
        ),
    )
    peak_bandwidth_fraction: float | None = Field(
        None, description="gbps / the device's peak memory bandwidth; null where unknown."
    )


class TrialPage(BaseModel):
    items: list[TrialOut]
    since: int
    next_since: int = Field(description="Pass as ?since= to get only newer trials.")
    job_state: JobState
    n_trials: int
