"""The lookup's last tier: the cost model's choice for a workload nobody tuned.

The default choice is :func:`ktune.tuner.lookup.cost_model_tier.cost_model_choice`; another
can replace it (:func:`register_model_choice`), and ``None`` turns the tier off, so that a
lookup no tier of the log answers finds nothing. It never makes a config up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ktune.db.lookup_records import LookupQuery
from ktune.tuner.lookup.answer import Answer
from ktune.tuner.lookup.cost_model_tier import cost_model_choice

if TYPE_CHECKING:
    from ktune.db.repository import TuningLog

__all__ = ["ModelChoice", "model_choice", "register_model_choice"]

#: given the log and the question, a config the model predicts best (tier ``cost_model``)
ModelChoice = Callable[["TuningLog", LookupQuery], "Answer | None"]

_lock = threading.Lock()
_choice: ModelChoice | None = cost_model_choice


def register_model_choice(choice: ModelChoice | None) -> ModelChoice | None:
    """Install the cost model's choice function (None removes it); returns the one it replaces,
    so a caller can put it back."""
    global _choice
    with _lock:
        previous, _choice = _choice, choice
    return previous


def model_choice(log: Callable[[], TuningLog], query: LookupQuery) -> Answer | None:
    """The registered model's answer, or None while no model is registered. ``log`` gives the
    log the model reads (asked only when a model is registered)."""
    choice = _choice
    if choice is None:
        return None
    answer = choice(log(), query)
    if answer is not None and answer.tier != "cost_model":
        raise ValueError(f"a model choice must answer with tier 'cost_model', not {answer.tier!r}")
    return answer
