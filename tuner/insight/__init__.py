"""Why a config wins: knob importance, strategy bands across seeds, the work of a workload.

Pure functions over the records of the tuning log (``ktune.db``); the service's ``/v1``
endpoints and the dashboard draw their answers.
"""

from __future__ import annotations

from ktune.tuner.insight.bands import Band, JobCurve, best_so_far, strategy_bands
from ktune.tuner.insight.importance import METHOD, KnobImportance, ValueEffect, knob_importance
from ktune.tuner.insight.peak import Peak, Rates, peak_of, rates, work_and_peak
from ktune.tuner.insight.throughput import Work, rate, work_of

__all__ = [
    "METHOD",
    "Band",
    "JobCurve",
    "KnobImportance",
    "Peak",
    "Rates",
    "ValueEffect",
    "Work",
    "best_so_far",
    "knob_importance",
    "peak_of",
    "rate",
    "rates",
    "strategy_bands",
    "work_and_peak",
    "work_of",
]
