"""What a job's strategy may know beyond its space (``SearchContext``), built from the log."""

from __future__ import annotations

from db import JobRecord, TuningLog
from search_space.space import SearchSpace
from search_space.workload import Workload
from tuner.strategies.base import SearchContext

__all__ = ["search_context"]


def search_context(
    tlog: TuningLog, job: JobRecord, space: SearchSpace, workload: Workload, *, with_prior: bool
) -> SearchContext:
    """The job's workload and device (with its spec when known) and, when ``with_prior``,
    every usable trial of a space with the same parameters in the log, except the job's own:
    so a resumed job sees the same prior as when it started (its own trials are replayed)."""
    from cost_model.devices import resolve
    from cost_model.training import samples_from_log

    stored = tlog.get_device(job.device_name)
    spec = resolve(job.device_name, stored.spec if stored else None)
    prior = tuple(samples_from_log(tlog, space.parameters, exclude_jobs=[job.id])) if with_prior else ()
    return SearchContext(workload=workload, device=job.device_name, spec=spec, prior=prior)
