"""What a job's strategy may know beyond its space (``SearchContext``), built from the log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktune.db import JobRecord, TuningLog
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.strategies.base import SearchContext

if TYPE_CHECKING:
    from ktune.cost_model.prior import PriorLimit
    from ktune.cost_model.samples import Sample

__all__ = ["search_context"]


def search_context(
    tlog: TuningLog,
    job: JobRecord,
    space: SearchSpace,
    workload: Workload,
    *,
    with_prior: bool,
    limit: PriorLimit | None = None,
) -> SearchContext:
    """The job's workload and device (with its spec when known), its measurement budget and,
    when ``with_prior``, the usable trials of a space with the same parameters in the log,
    except the job's own: so a resumed job sees the same prior as when it started (its own
    trials are replayed).
    ``limit`` bounds the trials loaded (``ktune.cost_model.prior``), drawn with the job's seed."""
    from ktune.cost_model.devices import resolve
    from ktune.tuner.training import samples_from_log

    stored = tlog.get_device(job.device_name)
    spec = resolve(job.device_name, stored.spec if stored else None)
    prior: tuple[Sample, ...] = ()
    if with_prior:
        prior = tuple(
            samples_from_log(
                tlog,
                space.parameters,
                exclude_jobs=[job.id],
                limit=limit,
                target=(workload.key, job.device_name),
                target_spec=spec,
                seed=job.spec.seed or 0,
            )
        )
    return SearchContext(
        workload=workload,
        device=job.device_name,
        spec=spec,
        prior=prior,
        max_trials=job.spec.budget_trials,
    )
