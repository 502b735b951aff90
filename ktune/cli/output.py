"""Shapes of what the CLI writes: the ``--out`` job file, trial rows, tables."""

from __future__ import annotations

import csv
import io
import json
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktune.tuner.lookup import utc_timestamp

if TYPE_CHECKING:
    from datetime import datetime

    from ktune.db.records import JobRecord, TrialRecord

__all__ = [
    "format_config",
    "format_ms",
    "job_document",
    "job_row",
    "jobs_csv",
    "trial_row",
    "trials_csv",
    "write_json_atomic",
    "write_text_atomic",
]


def trial_row(t: TrialRecord) -> dict[str, Any]:
    """One trial as the public ``--out`` / ``trials --format json`` schema has it."""
    return {
        "index": t.seq,
        "config": t.config,
        "status": t.status,
        "time_ms": t.time_ms,
        "compile_ms": t.compile_ms,
        "bench_ms": t.bench_ms,
        "clock_s": t.clock_s,
    }


def job_document(
    job: JobRecord, trials: Sequence[TrialRecord], optimum_ms: float | None = None
) -> dict[str, Any]:
    """The ``--out`` file: the job, its trials in measurement order, and its best trial."""
    rows = [trial_row(t) for t in trials]
    ok = [r for r in rows if r["status"] == "ok" and r["time_ms"] is not None]
    best: dict[str, Any] | None = None
    if ok:
        top = min(ok, key=lambda r: (r["time_ms"], r["index"]))
        best = {"index": top["index"], "config": top["config"], "time_ms": top["time_ms"]}
        if optimum_ms:
            best["optimum_ms"] = optimum_ms
            best["ratio_to_optimum"] = top["time_ms"] / optimum_ms
    return {
        "job": job.id,
        "device": job.device_name,
        "workload": job.workload_key,
        "strategy": job.spec.strategy,
        "seed": job.spec.seed,
        "state": job.state,
        "trials": rows,
        "best": best,
    }


def job_row(job: JobRecord) -> dict[str, Any]:
    """One job as ``ktune jobs --format json`` writes it: the fields of ``GET /v1/jobs/{id}``
    that the log holds, under the same names (times in UTC with a ``Z``)."""
    spec = job.spec
    return {
        "id": job.id,
        "state": job.state,
        "workload": job.workload_key,
        "device": job.device_name,
        "backend": spec.backend,
        "strategy": spec.strategy,
        "seed": spec.seed,
        "batch_size": spec.batch_size,
        "budget": {
            "trials": spec.budget_trials,
            "seconds": spec.budget_seconds,
            "target_ms": spec.target_ms,
        },
        "n_trials": job.n_trials,
        "best_time_ms": job.best_time_ms,
        "best_trial": job.best_seq,
        "best_config": job.best_config,
        "clock_s": job.clock_s,
        "error": job.error,
        "cancel_requested": job.cancel_requested,
        "runner": job.claimed_by,
        "created_at": _time(job.created_at),
        "started_at": _time(job.started_at),
        "finished_at": _time(job.finished_at),
        "heartbeat_at": _time(job.heartbeat_at),
    }


#: the columns of ``ktune jobs --format csv``: the flat fields of :func:`job_row`
_JOB_COLUMNS = (
    "id",
    "state",
    "workload",
    "device",
    "backend",
    "strategy",
    "seed",
    "n_trials",
    "best_time_ms",
    "best_trial",
    "clock_s",
    "created_at",
    "started_at",
    "finished_at",
)


def jobs_csv(jobs: Sequence[JobRecord]) -> str:
    """Jobs as CSV with a header row; an absent value is an empty cell."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(_JOB_COLUMNS)
    for job in jobs:
        row = job_row(job)
        writer.writerow(["" if row[c] is None else row[c] for c in _JOB_COLUMNS])
    return buf.getvalue()


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else utc_timestamp(moment)


def write_json_atomic(path: Path, document: Any) -> None:
    """Write JSON so that a reader never sees half a file (see :func:`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(document, indent=1) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that a reader never sees half a file, and a failure leaves the old
    file as it was: a temporary file beside it, renamed over it; mode 0644, as ``ktune
    export``'s files. The directory must exist (``check_output`` creates it).

    A file that already holds exactly ``text`` is not touched: a build that regenerates it
    on every run (``ktune best -f header -o``) rebuilds only what an answer changed."""
    path = path.expanduser()
    if not _holds(path, text):
        from ktune.search_space.formats.writing import replace_atomically

        replace_atomically(path, text.encode("utf-8"))


def _holds(path: Path, text: str) -> bool:
    """Whether ``path`` is a regular file with mode 0644 whose content is ``text`` (read only
    when its size already matches)."""
    data = text.encode("utf-8")
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o777 != 0o644 or st.st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def trials_csv(trials: Sequence[TrialRecord]) -> str:
    names: list[str] = []
    for t in trials:
        names.extend(k for k in t.config if k not in names)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["index", "status", "time_ms", "compile_ms", "bench_ms", "clock_s", *names])
    for t in trials:
        writer.writerow(
            [
                t.seq,
                t.status,
                "" if t.time_ms is None else t.time_ms,
                t.compile_ms,
                t.bench_ms,
                t.clock_s,
            ]
            + [t.config.get(n, "") for n in names]
        )
    return buf.getvalue()


def format_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def format_config(config: dict[str, Any] | None) -> str:
    return "-" if not config else " ".join(f"{k}={v}" for k, v in config.items())


def format_duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
