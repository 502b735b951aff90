"""``ktune.tune``: tune a kernel of your own from Python, in the spirit of Kernel Tuner's
``tune_kernel``, recorded in the tuning log like any job.

The kernel (C on this machine's CPU, CUDA on a GPU) is described as a T1 spec, which the job
stores with the kernel's source, and its numpy arguments go to a ``.npz`` file named by digest
in ktune's data directory, so ``ktune jobs``, ``ktune best``, the dashboard and ``ktune tune
--resume`` see the job as any other. Restrictions and ``verify`` given as Python functions are
not stored; a job that has them resumes through ``tune(..., resume=JOB)`` only.

Every input is checked before anything is measured: a bad one raises :class:`TuneInputError`
(a ``ValueError``) naming the argument. A config that does not compile, crashes, hangs, writes
past an array or computes a wrong answer is recorded with that status, and the job goes on.
"""

from __future__ import annotations

import math
import pickle
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktune.db import TuningLog

__all__ = ["TuneInputError", "TuneResult", "Trial", "tune"]

#: Kernel Tuner's ``lang`` names, and the suffixes that imply one
_LANGUAGES = {"c": "c", "cuda": "cuda"}
_SUFFIXES = {".c": "c", ".cu": "cuda", ".cuh": "cuda"}
_GRID_DIV = ("grid_div_x", "grid_div_y", "grid_div_z")


class TuneInputError(ValueError):
    """An argument of :func:`tune` that cannot be used; ``argument`` names it."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"{argument}: {problem}")
        self.argument = argument


@dataclass(frozen=True)
class Trial:
    """One measured config: its status (``ok``, ``compile_error``, ``runtime_error``,
    ``wrong_result``, ``timeout``), median time in ms (None unless ok), the metrics derived
    from the time, and the error text."""

    config: dict[str, Any]
    status: str
    time_ms: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class TuneResult:
    """The job (its id in the tuning log), every trial in measurement order, the best by the
    objective (None when no config ran correctly), and the device and workload it was for."""

    job_id: int
    trials: list[Trial]
    best: Trial | None
    device: str
    workload: str
    objective: str = "time"


def tune(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: int | Sequence[int],
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    *,
    lang: str | None = None,
    restrictions: str | Callable[..., Any] | Sequence[str | Callable[..., Any]] | None = None,
    answer: Sequence[Any] | None = None,
    atol: float = 1e-6,
    verify: Callable[..., Any] | None = None,
    grid_div_x: Sequence[str] | None = None,
    grid_div_y: Sequence[str] | None = None,
    grid_div_z: Sequence[str] | None = None,
    compiler_options: Sequence[str] = (),
    metrics: Mapping[str, Callable[[dict[str, Any]], float]] | None = None,
    objective: str = "time",
    objective_higher_is_better: bool | None = None,
    budget: int | None = None,
    time_budget: float | None = None,
    strategy: str = "auto",
    seed: int | None = None,
    batch_size: int = 1,
    db: str | TuningLog | None = None,
    device: int = 0,
    timeout: float = 30.0,
    flops: float = 0.0,
    name: str | None = None,
    resume: int | None = None,
) -> TuneResult:
    """Tune ``kernel_name`` of ``kernel_source`` (the text, or a path to a ``.c``/``.cu``
    file) over ``tune_params`` (name -> list of values) and record every trial.

    ``problem_size`` and the config's values reach the source as ``#define``s. C kernels take
    ``arguments`` in order (numpy arrays as pointers, numpy scalars such as ``np.int32(n)`` by
    value) and return nothing; CUDA kernels are launched on a grid of ``problem_size`` divided
    by ``grid_div_*`` (default ``block_size_x``). ``restrictions``: expressions in the
    constraint language (``"tile_x * tile_y <= 64"``) and/or functions of a config returning
    whether it is valid. ``answer``: one expected array per argument (None where unchecked),
    compared with ``atol``; ``verify(answer, outputs, atol) -> bool`` (C only) checks the
    outputs instead. ``metrics``: name -> function of the config with ``time`` (ms) added;
    ``objective``: ``time`` or a metric's name (metrics: higher is better unless said): what
    the search optimises and what picks :attr:`TuneResult.best` (the log keeps the times).
    ``budget`` (trials) and ``time_budget`` (seconds) bound the job; without either, every
    valid config is measured. ``db``: a tuning-log URL or an open ``TuningLog`` (default: the
    user's log). ``resume``: continue that job (its stored kernel and space) instead.
    """
    from ktune.db import TuningLog
    from ktune.tuner import lifecycle
    from ktune.tuner.budget import Budget
    from ktune.tuner.jobs import JobError, JobRequest
    from ktune.tuner.sources import Environment, open_source
    from ktune.tuner.sources.custom import KernelHooks

    texts, callables = _restrictions(restrictions)
    if verify is not None:
        _picklable("verify", verify)
    chosen_metrics = dict(metrics or {})
    for key, fn in chosen_metrics.items():
        if not callable(fn):
            raise TuneInputError(f"metrics[{key!r}]", "is not a function of the config")
    if objective != "time" and objective not in chosen_metrics:
        raise TuneInputError("objective", f"{objective!r} is neither 'time' nor a metric's name")
    higher = (
        (objective != "time") if objective_higher_is_better is None else objective_higher_is_better
    )
    steer = None
    if objective != "time":
        metric = chosen_metrics[objective]

        def steer(config: dict[str, Any], time_ms: float) -> float:
            return float(metric({**config, "time": time_ms}))

    hooks = KernelHooks(tuple(callables), verify, steer, higher)
    environment = Environment(kernel_hooks=hooks)
    owned = not isinstance(db, TuningLog)
    tlog = TuningLog.open(db) if not isinstance(db, TuningLog) else db
    try:
        if resume is not None:
            try:
                resumption = lifecycle.prepare_resume(tlog, resume, environment)
            except JobError as exc:
                raise TuneInputError("resume", str(exc)) from None
            job_id = resume
            source = resumption.source
        else:
            options = _options(
                kernel_name,
                kernel_source,
                problem_size,
                arguments,
                tune_params,
                lang=lang,
                texts=texts,
                answer=answer,
                atol=atol,
                grid_div=(grid_div_x, grid_div_y, grid_div_z),
                compiler_options=compiler_options,
                device=device,
                timeout=timeout,
                flops=flops,
                name=name or kernel_name,
                python=hooks.names(),
            )
            try:
                source = open_source(options, environment)
            except ValueError as exc:
                raise TuneInputError("kernel", str(exc)) from None
            try:
                limits = Budget(max_trials=budget, max_seconds=time_budget)
                request = JobRequest(source, strategy, limits, seed=seed, batch_size=batch_size)
            except ValueError as exc:
                raise TuneInputError("budget/strategy/batch_size", str(exc)) from None
            job_id = lifecycle.submit(tlog, request, run_here=True).id
        if source is not None:
            _warn_predicate_error(source)
            lifecycle.run_here(tlog, job_id, source=source)
        return _result(tlog, job_id, chosen_metrics, objective, higher)
    finally:
        if owned:
            tlog.close()


def _options(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: int | Sequence[int],
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    *,
    lang: str | None,
    texts: list[str],
    answer: Sequence[Any] | None,
    atol: float,
    grid_div: tuple[Sequence[str] | None, ...],
    compiler_options: Sequence[str],
    device: int,
    timeout: float,
    flops: float,
    name: str,
    python: tuple[str, ...],
) -> Any:
    """The job's options: the T1 document, the source, the arrays' file."""
    import numpy as np
    import platformdirs

    from ktune.search_space.constraints import ConstraintError, parse_constraint
    from ktune.tuner.bounds import MAX_KERNEL_SOURCE_BYTES
    from ktune.tuner.sources import CustomOptions, SourceError
    from ktune.tuner.sources.custom import save_arrays

    if not isinstance(kernel_name, str) or not kernel_name.isidentifier():
        raise TuneInputError("kernel_name", f"{kernel_name!r} is not a C identifier")
    source, suffix = _source(kernel_source)
    if len(source.encode()) > MAX_KERNEL_SOURCE_BYTES:
        raise TuneInputError(
            "kernel_source",
            f"{len(source.encode())} bytes, more than the limit of {MAX_KERNEL_SOURCE_BYTES}",
        )
    language = _language(lang, suffix)
    sizes = (problem_size,) if isinstance(problem_size, int | np.integer) else problem_size
    if (
        isinstance(sizes, str)
        or not 1 <= len(sizes) <= 3
        or any(isinstance(d, bool) or not isinstance(d, int | np.integer) or d <= 0 for d in sizes)
    ):
        raise TuneInputError("problem_size", f"{problem_size!r} is not 1 to 3 positive ints")
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise TuneInputError("tune_params", "give a dict of parameter name -> list of values")
    parameters = [_parameter(k, v) for k, v in tune_params.items()]
    for i, text in enumerate(texts):
        try:
            parse_constraint(text, list(tune_params))
        except ConstraintError as exc:
            raise TuneInputError(f"restrictions[{i}]", str(exc)) from None
    if isinstance(arguments, np.ndarray | str) or not isinstance(arguments, Sequence):
        raise TuneInputError("arguments", "give a list of numpy arrays and numpy scalars")
    entries = [_argument(i, v) for i, v in enumerate(arguments)]
    if answer is not None:
        _check_answer(answer, arguments, atol)
        for i, a in enumerate(answer):
            if a is not None:
                entries[i]["Output"] = True
    else:
        for entry in entries:
            entry["Output"] = entry["MemoryType"] == "Vector"
    kernel: dict[str, Any] = {
        "Language": "C" if language == "c" else "CUDA",
        "KernelName": kernel_name,
        "ProblemSize": [int(d) for d in sizes],
        "CompilerOptions": list(compiler_options),
        "Arguments": entries,
    }
    for axis, divisors in zip("XYZ", grid_div):
        if divisors is not None:
            if isinstance(divisors, str) or not all(isinstance(d, str) for d in divisors):
                raise TuneInputError(f"grid_div_{axis.lower()}", "give a list of parameter names")
            kernel[f"GridDiv{axis}"] = list(divisors)
    document = {
        "General": {"BenchmarkName": name, "FormatVersion": 1},
        "ConfigurationSpace": {
            "TuningParameters": parameters,
            "Conditions": [{"Expression": t} for t in texts],
        },
        "KernelSpecification": kernel,
        "ktune": {"atol": float(atol), "flops": float(flops)},
    }
    arrays_dir = Path(platformdirs.user_data_dir("ktune")) / "kernels"
    try:
        arrays, digest = save_arrays(arrays_dir, list(arguments), answer)
    except OSError as exc:
        raise TuneInputError("arguments", f"cannot be stored in {arrays_dir}: {exc}") from None
    try:
        return CustomOptions(
            document=document,
            source=source,
            language=language,
            arrays=arrays,
            arrays_digest=digest,
            python=python,
            device=device,
            timeout_s=float(timeout),
        )
    except SourceError as exc:
        raise TuneInputError("kernel", str(exc)) from None


def _source(kernel_source: str | Path) -> tuple[str, str]:
    """The kernel's text and its file's suffix ('' for a string of code)."""
    if isinstance(kernel_source, Path) or (
        isinstance(kernel_source, str)
        and "\n" not in kernel_source
        and Path(kernel_source).suffix in _SUFFIXES
    ):
        path = Path(kernel_source)
        try:
            return path.read_text(encoding="utf-8"), path.suffix
        except (OSError, UnicodeDecodeError) as exc:
            raise TuneInputError("kernel_source", f"{path} cannot be read ({exc})") from None
    if not isinstance(kernel_source, str) or not kernel_source.strip():
        raise TuneInputError("kernel_source", "give the kernel's code or a path to its file")
    return kernel_source, ""


def _language(lang: str | None, suffix: str) -> str:
    if lang is None:
        return _SUFFIXES.get(suffix, "cuda")
    language = _LANGUAGES.get(str(lang).lower())
    if language is None:
        raise TuneInputError("lang", f"{lang!r}: ktune tunes C and CUDA kernels")
    return language


def _parameter(name: Any, values: Any) -> dict[str, Any]:
    """A T1 TuningParameters entry; the values' kind must be one of T1's."""
    where = f"tune_params[{name!r}]"
    if not isinstance(name, str) or not name.isidentifier():
        raise TuneInputError(where, "a parameter's name must be an identifier")
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Sequence) or not values:
        raise TuneInputError(where, f"{values!r} is not a non-empty list of values")
    values = [v.item() if hasattr(v, "item") else v for v in values]
    if all(isinstance(v, bool) for v in values):
        kind = "bool"
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        kind = "int"
    elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        kind = "float"
        if not all(math.isfinite(v) for v in values):
            raise TuneInputError(where, "values must be finite numbers")
    elif all(isinstance(v, str) for v in values):
        kind = "string"
    else:
        raise TuneInputError(where, "values must all be ints, numbers, strings or bools")
    if len(set(values)) != len(values):
        raise TuneInputError(where, "values repeat")
    return {"Name": name, "Type": kind, "Values": values}


def _argument(i: int, value: Any) -> dict[str, Any]:
    """A T1 Arguments entry describing ``value`` (its contents travel in the ``.npz``)."""
    import numpy as np

    from ktune.search_space.operators.custom import _C_TYPES

    where = f"arguments[{i}]"
    if isinstance(value, np.ndarray):
        memory, size = "Vector", int(value.size)
    elif isinstance(value, np.generic):
        memory, size = "Scalar", 1
    else:
        raise TuneInputError(
            where,
            f"{type(value).__name__}: give a numpy array, or a numpy scalar (np.int32(n), "
            "np.float32(x)) that says its C type",
        )
    names = {np.dtype(t).name: k for k, t in _C_TYPES.items()}
    ctype = names.get(value.dtype.name)
    if ctype is None:
        raise TuneInputError(where, f"dtype {value.dtype} is not one a kernel takes")
    if memory == "Vector" and value.size == 0:
        raise TuneInputError(where, "an empty array")
    return {
        "Name": f"arg{i}",
        "Type": ctype,
        "MemoryType": memory,
        "Size": size,
        "FillType": "Constant",
        "FillValue": 0,
    }


def _check_answer(answer: Sequence[Any], arguments: Sequence[Any], atol: float) -> None:
    import numpy as np

    if isinstance(answer, np.ndarray) or not isinstance(answer, Sequence):
        raise TuneInputError("answer", "give a list with one entry per argument (None: unchecked)")
    if len(answer) != len(arguments):
        raise TuneInputError(
            "answer", f"{len(answer)} entries for {len(arguments)} arguments (None: unchecked)"
        )
    for i, (a, v) in enumerate(zip(answer, arguments)):
        if a is None:
            continue
        if not isinstance(v, np.ndarray):
            raise TuneInputError(f"answer[{i}]", "argument {i} is a scalar, not an output")
        if np.shape(a) != v.shape and np.size(a) != v.size:
            raise TuneInputError(
                f"answer[{i}]", f"shape {np.shape(a)} differs from the argument's {v.shape}"
            )
    if not (isinstance(atol, int | float) and math.isfinite(atol) and atol >= 0):
        raise TuneInputError("atol", f"{atol!r} is not a finite number >= 0")


def _restrictions(
    restrictions: str | Callable[..., Any] | Sequence[str | Callable[..., Any]] | None,
) -> tuple[list[str], list[Callable[..., Any]]]:
    """Split ``restrictions`` into expressions and functions."""
    if restrictions is None:
        return [], []
    if isinstance(restrictions, str) or callable(restrictions):
        restrictions = [restrictions]
    if not isinstance(restrictions, Sequence):
        raise TuneInputError("restrictions", "give expression strings and/or functions")
    texts: list[str] = []
    callables: list[Callable[..., Any]] = []
    for i, r in enumerate(restrictions):
        if isinstance(r, str):
            texts.append(r)
        elif callable(r):
            callables.append(r)
        else:
            raise TuneInputError(f"restrictions[{i}]", f"{r!r} is neither a string nor a function")
    return texts, callables


def _picklable(argument: str, fn: Callable[..., Any]) -> None:
    """``fn`` runs in the measuring worker process, which receives it pickled."""
    try:
        pickle.dumps(fn)
    except Exception as exc:  # noqa: BLE001 - pickle raises several kinds
        raise TuneInputError(
            argument, f"must be a module-level function (it runs in the measuring process): {exc}"
        ) from None


def _warn_predicate_error(source: Any) -> None:
    """Say once that a callable restriction raised (those configs are left out)."""
    error = getattr(getattr(source, "operator", None), "predicate_error", None)
    if error:
        warnings.warn(
            f"a restriction raised on a config, which is left out (first: {error})",
            RuntimeWarning,
            stacklevel=3,
        )


def _result(
    tlog: TuningLog,
    job_id: int,
    metrics: Mapping[str, Callable[[dict[str, Any]], float]],
    objective: str,
    higher: bool,
) -> TuneResult:
    job = tlog.get_job(job_id)
    assert job is not None
    trials: list[Trial] = []
    times: list[float | None] = []  # the median of all its runs when its job confirmed it
    published: Trial | None = None
    for t in tlog.job_trials(job_id):
        derived: dict[str, float] = {}
        time_ms = t.confirmed_ms if t.confirmed_ms is not None else t.time_ms
        if t.status == "ok" and time_ms is not None:
            for key, fn in metrics.items():
                try:
                    derived[key] = float(fn({**t.config, "time": time_ms}))
                except Exception as exc:  # noqa: BLE001 - the user's function
                    raise TuneInputError(f"metrics[{key!r}]", f"raised {exc!r}") from None
        trials.append(Trial(dict(t.config), t.status, t.time_ms, derived, t.error))
        times.append(time_ms)
        if t.id == job.best_trial_id:
            published = trials[-1]
    scored = [i for i, t in enumerate(trials) if t.status == "ok" and times[i] is not None]

    def score(i: int) -> float:
        value = times[i] if objective == "time" else trials[i].metrics[objective]
        assert value is not None
        return -value if higher else value

    if objective == "time" and published is not None:
        best: Trial | None = published  # what the log publishes (confirmed when it was)
    else:
        best = trials[min(scored, key=score)] if scored else None
    return TuneResult(job_id, trials, best, job.device_name, job.workload_key, objective)
