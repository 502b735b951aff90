"""``ktune tune``: run a tuning job on a recorded space or on the local GPU, or resume one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ktune.cli.common import (
    CliError,
    DbOption,
    check_output,
    check_range,
    err,
    open_log,
    out,
)
from ktune.cli.output import (
    format_config,
    format_duration,
    format_ms,
    job_document,
    write_json_atomic,
)
from ktune.cli.shape_list import shape_list
from ktune.db import JobRecord, TrialRecord, TuningLog
from ktune.tuner import strategies
from ktune.tuner.bounds import (
    MAX_BATCH,
    MAX_CONFIRM,
    MAX_JOB_ID,
    MAX_RAY_WORKERS,
    MAX_REPLAY_SPEED,
    MAX_REUSE_WINDOW_S,
    MAX_SEED,
    MAX_TRIALS,
    MIN_REPLAY_SPEED,
)
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobError, JobRequest
from ktune.tuner.lifecycle import prepare_resume, run_here, submit
from ktune.tuner.loop import Batch, Outcome, Stop
from ktune.tuner.measure.ray_pool import START_TIMEOUT_S, RayPlacement
from ktune.tuner.sources import (
    Source,
    SourceKind,
    SourceRequest,
    kind_of,
    open_demo,
    open_source,
    request_options,
)

__all__ = ["tune"]

_REASONS = {
    "budget": "measurement budget reached",
    "time": "time budget reached",
    "target": "target time reached",
    "patience": "no improvement within the patience",
    "exhausted": "every configuration of the space measured",
    Stop.CANCELLED: "on request (REST API or dashboard)",
}
#: the options that go with --resume; a resumed job keeps everything else it was created with
_RESUME_OPTIONS = frozenset({"resume", "out_file", "quiet", "db"})


def tune(
    ctx: typer.Context,
    replay: Annotated[
        str | None,
        typer.Option("--replay", help="Kernel Tuner cache file (or bundled name) to replay."),
    ] = None,
    op: Annotated[
        str | None,
        typer.Option(
            "--op",
            help=(
                "Operator to tune on the local GPU: matmul, conv2d, reduction, softmax, transpose, "
                "or custom (with --spec); or on this CPU: cpu_matmul, cpu_conv2d."
            ),
        ),
    ] = None,
    resume: Annotated[
        int | None,
        typer.Option(
            "--resume",
            help="Resume job JOB where it stopped, with its own budget, strategy and seed.",
        ),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help=(
                "Tune fp16 matmul on the local GPU if there is one, "
                "else replay the bundled convolution_A4000 recording."
            ),
        ),
    ] = False,
    shape: Annotated[
        str | None,
        typer.Option("--shape", help="Problem shape for --op, e.g. 4096x4096x4096 (matmul MxNxK)."),
    ] = None,
    shapes: Annotated[
        str | None,
        typer.Option(
            "--shapes",
            help="Several shapes for --op, comma-separated (128x128x128,256x256x256): one job "
            "each, in order; later shapes start from what earlier ones measured.",
        ),
    ] = None,
    shapes_from: Annotated[
        Path | None,
        typer.Option(
            "--shapes-from",
            help="A file of shapes for --op, one a line (# comments), tuned as --shapes.",
        ),
    ] = None,
    dtype: Annotated[
        str,
        typer.Option(
            "--dtype",
            help="Data type for --op: float32 or float16 (GPU), float32 or float64 (CPU).",
        ),
    ] = "float32",
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            help=(
                "Layout for --op: NCHW/NHWC (conv2d; NCHW for cpu_conv2d; _pad1x1 adds padding), "
                "sum/max (reduction)."
            ),
        ),
    ] = "",
    device: Annotated[int, typer.Option("--device", help="CUDA device index for --op.")] = 0,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help=(
                "Measure --op on GPUs of a Ray cluster: auto (the cluster of this node), "
                "ray://HOST:PORT, or local."
            ),
        ),
    ] = None,
    ray_workers: Annotated[
        int | None,
        typer.Option(
            "--ray-workers", help="With --ray: GPUs measuring in parallel (use with --batch)."
        ),
    ] = None,
    gpu_type: Annotated[
        str | None,
        typer.Option(
            "--gpu-type", help="With --ray: the Ray accelerator type to run on, e.g. H100 or A100."
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds one measurement may take on the GPU before its worker is killed.",
        ),
    ] = 30.0,
    strategy: Annotated[
        str, typer.Option("--strategy", "-s", help="Search strategy (see `ktune strategies`).")
    ] = strategies.DEFAULT,
    budget: Annotated[
        int | None,
        typer.Option("--budget", "-n", help=f"Maximum number of measurements (1..{MAX_TRIALS})."),
    ] = None,
    time_budget: Annotated[
        float | None,
        typer.Option(
            "--time-budget",
            help="Maximum tuning time in seconds (replayed GPU time for recordings).",
        ),
    ] = None,
    target: Annotated[
        float | None, typer.Option("--target", help="Stop once a config runs in this many ms.")
    ] = None,
    patience: Annotated[
        int | None,
        typer.Option(
            "--patience",
            help=f"Stop after this many measurements without improvement (1..{MAX_TRIALS}).",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Random seed, 0..2**31-1: the same seed gives the same sequence."
        ),
    ] = None,
    batch: Annotated[
        int,
        typer.Option("--batch", "-b", help=f"Configurations measured per batch (1..{MAX_BATCH})."),
    ] = 1,
    reuse_window: Annotated[
        float | None,
        typer.Option(
            "--reuse-window",
            help=(
                "Reuse the log's trials of this workload, device and toolchain up to this many "
                "seconds old instead of measuring them again (default 30 days; 0: measure "
                "everything)."
            ),
        ),
    ] = None,
    confirm: Annotated[
        int | None,
        typer.Option(
            "--confirm",
            help=(
                f"Re-measure this many top configs (0..{MAX_CONFIRM}) in 3 interleaved rounds "
                "before the job ends (default 3, none for a replay; 0: none)."
            ),
        ),
    ] = None,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            help=(
                "T1 spec: alone, your own kernel (its KernelFile; Language C on this CPU, CUDA "
                "on the GPU); with --replay, the space to search."
            ),
        ),
    ] = None,
    constraint: Annotated[
        list[str] | None,
        typer.Option(
            "--constraint",
            "-c",
            help="Extra constraint, e.g. 'block_size_x*block_size_y <= 512' (repeatable).",
        ),
    ] = None,
    replay_speed: Annotated[
        float | None,
        typer.Option(
            "--replay-speed",
            help=(
                "Spend the recorded GPU time in real time, this many times faster "
                "(to watch a job live)."
            ),
        ),
    ] = None,
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help=(
                "Write the job and its trials as JSON (mode 0644; missing directories are created)."
            ),
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    db: DbOption = None,
) -> None:
    """Tune a recorded space (--replay), an operator on this GPU or CPU (--op), or resume a job."""
    own_kernel = spec is not None and replay is None and op is None and resume is None and not demo
    if sum(x is not None for x in (replay, op, resume)) + demo + own_kernel != 1:
        raise CliError(
            "give exactly one of --replay FILE, --op OPERATOR, --spec T1.json (your own "
            "kernel), --demo or --resume JOB"
        )
    check_range("--resume", resume, 1, MAX_JOB_ID)
    check_range("--budget", budget, 1, MAX_TRIALS)
    check_range("--patience", patience, 1, MAX_TRIALS)
    check_range("--seed", seed, 0, MAX_SEED)
    check_range("--batch", batch, 1, MAX_BATCH)
    check_range("--reuse-window", reuse_window, 0, MAX_REUSE_WINDOW_S)
    check_range("--confirm", confirm, 0, MAX_CONFIRM)
    check_range("--replay-speed", replay_speed, MIN_REPLAY_SPEED, MAX_REPLAY_SPEED)
    check_range("--ray-workers", ray_workers, 1, MAX_RAY_WORKERS)
    if (ray_workers is not None or gpu_type is not None) and ray is None:
        raise CliError("--ray-workers and --gpu-type go with --ray ADDRESS")
    if ray is not None and op is None:
        raise CliError("--ray goes with --op: a recording is replayed here, without a GPU")
    if out_file is not None:
        out_file = check_output("--out", out_file)
    if resume is not None:
        ignored = [
            p.opts[0]
            for p in ctx.command.params
            if p.name not in _RESUME_OPTIONS and _given(ctx, p.name)
        ]
        if ignored:
            raise CliError(
                f"{', '.join(ignored)} cannot go with --resume: "
                f"job {resume} keeps the budget, strategy, "
                "seed and space it was created with"
            )
        tlog = open_log(db)
        with tlog:
            try:
                resumption = prepare_resume(tlog, resume)
            except JobError as exc:
                raise CliError(str(exc)) from None
            job = resumption.job
            if resumption.source is None:
                out.print(f"job {resume} is already done ({job.n_trials} trials)")
                _write_out(tlog, resume, out_file, None)
                return
            _run(tlog, resume, resumption.source, job.spec.budget_trials, out_file, quiet)
        return

    # Validate every input before anything is written.
    limits = Budget(max_trials=budget, max_seconds=time_budget, target_ms=target, patience=patience)
    make = partial(
        JobRequest,
        strategy=strategy,
        budget=limits,
        seed=seed,
        batch_size=batch,
        reuse_window_s=reuse_window,
        confirm=confirm,
    )
    several = shape_list(shape, shapes, shapes_from, op)
    source: Source
    if demo:
        source, note = open_demo(timeout)
        if note is not None and not quiet:
            err.print(note, markup=False)
    else:
        request = SourceRequest(
            replay=replay,
            operator=op,
            shape=shape if several is None else several[0],
            dtype=dtype,
            layout=layout,
            spec=spec,
            device=device if _given(ctx, "device") else None,
            constraints=tuple(constraint or ()),
            timeout_s=timeout,
            speed=replay_speed,
        )
        kind = kind_of(request)
        if kind is SourceKind.CPU and (
            ray is not None or spec is not None or request.device is not None
        ):
            raise CliError(
                f"{op} runs on this machine's CPU: --ray, --spec and --device are for GPU kernels"
            )
        if spec is not None and kind not in (SourceKind.REPLAY, SourceKind.CUSTOM):
            raise CliError("--spec goes with --replay, --op custom or alone (your own kernel)")
        placement = _placement(ray, ray_workers, gpu_type)
        if placement is not None:
            request = replace(request, ray=placement)
        options = request_options(request)
        if several is not None:
            if out_file is not None:
                raise CliError("--out writes one job: leave it out with --shapes (`ktune jobs`)")
            # every shape is checked before the first job starts
            each = [request_options(replace(request, shape=s)) for s in several]
            _run_shapes(each, make, budget, quiet, db)
            return
        if placement is not None and not quiet:
            err.print(
                (
                    f"asking {placement.describe()} for its spec "
                    f"(waiting up to {START_TIMEOUT_S:g} s for a node to offer one)"
                ),
                markup=False,
            )
        source = open_source(options)
    job_request = make(source)
    if budget is None and not quiet:
        err.print(
            f"no --budget: measuring until all {len(source.space)} configs are measured "
            "or another limit stops it",
            markup=False,
        )
    tlog = open_log(db)
    with tlog:
        job = submit(tlog, job_request, run_here=True)
        _run(tlog, job.id, source, budget, out_file, quiet)


def _run_shapes(
    each: list[Any],
    make: Callable[[Source], JobRequest],
    budget: int | None,
    quiet: bool,
    db: str | None,
) -> None:
    """One job per shape, in order, in one log: each later job's strategy sees the earlier
    jobs' trials as its prior (a space of the same parameters)."""
    for n, options in enumerate(each, 1):
        source = open_source(options)
        if not quiet:
            err.print(f"shape {n} of {len(each)}", markup=False)
        job_request = make(source)
        with open_log(db) as tlog:
            job = submit(tlog, job_request, run_here=True)
            _run(tlog, job.id, source, budget, None, quiet)


def _placement(
    address: str | None, workers: int | None, gpu_type: str | None
) -> RayPlacement | None:
    """The Ray placement of ``--ray``, ``--ray-workers`` and ``--gpu-type`` (None without --ray)."""
    if address is None:
        return None
    try:
        return RayPlacement(address, workers or 1, gpu_type)
    except ValueError as exc:
        raise CliError(f"--ray: {exc}") from None


def _given(ctx: typer.Context, name: str | None) -> bool:
    """Whether the option ``name`` was on the command line (not its default)."""
    source = ctx.get_parameter_source(name) if name else None
    return source is not None and source.name == "COMMANDLINE"  # typer may vendor click's enum


def _run(
    tlog: TuningLog,
    job_id: int,
    source: Source,
    total: int | None,
    out_file: Path | None,
    quiet: bool,
) -> None:
    job = tlog.get_job(job_id)
    assert job is not None
    optimum_ms = source.optimum_ms
    header = (
        f"job {job_id}: {job.spec.strategy} on {job.workload_key} @ {job.device_name} "
        f"({len(source.space)} configs, {source.description})"
    )
    if not quiet:
        err.print(header)
    progress = Progress(
        TextColumn("[bold]tuning[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best {task.fields[best]}"),
        TextColumn("clock {task.fields[clock]}"),
        console=err,
        disable=quiet,
        transient=False,
    )
    task = progress.add_task(
        "tune",
        total=total,
        completed=job.n_trials,
        best=format_ms(job.best_time_ms),
        clock=format_duration(job.clock_s),
    )

    def show(batch: Batch) -> None:
        s = batch.state
        progress.update(
            task, completed=s.n_trials, best=format_ms(s.best_ms), clock=format_duration(s.clock_s)
        )

    try:
        with progress:
            outcome = run_here(tlog, job_id, source=source, on_batch=[show])
    except KeyboardInterrupt:
        message = (
            f"interrupted: job {job_id} keeps its trials; "
            f"continue with `ktune tune --resume {job_id}`"
        )
        try:
            _write_out(tlog, job_id, out_file, optimum_ms)
        except CliError as exc:
            message += f"; {exc}"
        raise CliError(message, 130) from None
    job, trials = (
        tlog.get_job(job_id),
        tlog.job_trials(job_id),
    )  # read once for the file and the summary
    assert job is not None
    if out_file is not None:
        _save(out_file, job_document(job, trials, optimum_ms), job_id)
    _summary(tlog, job, outcome, optimum_ms, out_file, trials)


def _write_out(
    tlog: TuningLog, job_id: int, out_file: Path | None, optimum_ms: float | None
) -> None:
    if out_file is None:
        return
    job = tlog.get_job(job_id)
    assert job is not None
    _save(out_file, job_document(job, tlog.job_trials(job_id), optimum_ms), job_id)


def _save(out_file: Path, document: dict[str, Any], job_id: int) -> None:
    """Write the --out file; a failure is one line that says where the trials are."""
    try:
        write_json_atomic(out_file, document)
    except OSError as exc:
        raise CliError(
            f"cannot write --out {out_file}: {exc.strerror or exc}; "
            f"job {job_id}'s trials are in the tuning log (`ktune trials {job_id}`)"
        ) from None


def _summary(
    tlog: TuningLog,
    job: JobRecord,
    outcome: Outcome,
    optimum_ms: float | None,
    out_file: Path | None,
    trials: list[TrialRecord],
) -> None:
    job_id = job.id
    ok = [t for t in trials if t.status == "ok" and t.time_ms is not None]
    out.print(f"job {job_id} {job.state}: {_REASONS.get(outcome.reason, outcome.reason)}")
    out.print(
        f"  measurements  {job.n_trials} ({len(ok)} ok), "
        f"{format_duration(job.clock_s)} of tuning time"
    )
    if ok:
        best = min(ok, key=lambda t: (t.time_ms, t.seq))
        # a confirmed job publishes the best median over its re-measured candidates
        best = next((t for t in ok if t.id == job.best_trial_id and t.confirmed_ms), best)
        # numbered as `ktune trials` numbers it (its "#" column, from 0)
        line = (
            f"  best          {format_ms(best.time_ms)} "
            f"at trial #{best.seq if best.seq is not None else '?'}"
        )
        if best.confirmed_ms is not None:
            band = f" ±{best.noise_band:.0%}" if best.noise_band is not None else ""
            line += f", confirmed {format_ms(best.confirmed_ms)}{band}"
        if optimum_ms and best.time_ms is not None:  # always set: `ok` keeps timed trials only
            line += (
                f", {best.time_ms / optimum_ms:.3f} x the recording's optimum "
                f"({format_ms(optimum_ms)})"
            )
        out.print(line)
        out.print(f"  config        {format_config(best.config)}")
    else:
        out.print("  best          none: no configuration ran successfully")
    out.print(f"  tuning log    {tlog.url}  (`ktune trials {job_id}`)")
    if job.warning:
        err.print(f"warning: {job.warning}", markup=False)
    if out_file is not None:
        out.print(f"  trials file   {out_file}")
    if trials and not ok:
        counts = Counter(t.status for t in trials)
        failed = ", ".join(f"{n} {status}" for status, n in counts.most_common())
        raise CliError(
            (
                f"job {job_id}: no configuration ran successfully ({failed}); "
                f"see `ktune trials {job_id}`"
            ),
            3,
        )
