"""The default cost-model tier: rank an operator's space for a workload nobody has tuned.

For a workload of one of ktune's operators (``ktune.search_space.operators``) on a device whose spec
is known (stored with the device, or in the catalog), the operator's space is built for that
device's limits and ranked by a cost model trained on the log's trials of spaces with the
same parameters (other shapes, other devices; at most ``ktune.cost_model.transfer.DEFAULT_LIMIT`` of
them, the most relevant first, so a lookup does not slow down as the log grows; read by
``ktune.tuner.training.transfer_model``). The answer's ``time_ms`` is ``None``: the model predicts a
ranking, not a time. No spec, no matching trials, or a recorded (Kernel Tuner) space without
an operator: no answer, never a guess. The model, numpy and XGBoost are imported only when
this tier is reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktune.db.lookup_records import LookupQuery
from ktune.tuner.lookup.answer import Answer

if TYPE_CHECKING:
    from ktune.db.repository import TuningLog

__all__ = ["cost_model_choice"]


def cost_model_choice(tlog: TuningLog, query: LookupQuery) -> Answer | None:
    from ktune.cost_model.devices import resolve
    from ktune.cost_model.model import ModelError
    from ktune.search_space import operators
    from ktune.search_space.operators.base import DeviceLimits
    from ktune.tuner.training import transfer_model

    if query.operator not in operators.names():
        return None
    stored = tlog.get_device(query.device)
    spec = resolve(query.device, stored.spec if stored else None)
    if spec is None:
        return None
    op = operators.get(query.operator)
    try:
        workload = op.workload(query.shape, query.dtype or "float32", query.layout)
        space = op.space(workload, DeviceLimits.from_spec(spec))
        if len(space) == 0:
            return None
        model = transfer_model(tlog, space, workload, spec)
    except (ModelError, ValueError) as exc:  # operator/space errors are ValueErrors too
        import logging

        logging.getLogger(__name__).debug(
            "no cost-model answer for %s on %s: %s", query.workload_key, query.device, exc
        )
        return None
    best = int(model.rank()[0])
    return Answer(
        query=query,
        tier="cost_model",
        workload=workload.key,
        device=query.device,
        config=space.config(best),
        time_ms=None,
        trial=None,
        distance=0.0,
        updated_at=None,
    )
