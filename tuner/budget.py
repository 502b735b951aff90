"""When a tuning job stops: measurements, tuning time, a target time, or no progress."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Budget", "BudgetError"]


class BudgetError(ValueError):
    """A budget value is out of range."""


@dataclass(frozen=True)
class Budget:
    """Limits of a job; ``None`` means unlimited. A job also stops when the space is used up.

    ``max_seconds`` is tuning time on the job's clock: recorded compile + benchmark time for a
    replayed recording, wall time on a real device. It is checked between batches.
    ``patience`` stops the job after that many measurements without a new best.
    """

    max_trials: int | None = None
    max_seconds: float | None = None
    target_ms: float | None = None
    patience: int | None = None

    def __post_init__(self) -> None:
        for label, value in (
            ("budget", self.max_trials),
            ("time budget", self.max_seconds),
            ("target", self.target_ms),
            ("patience", self.patience),
        ):
            if value is None:
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise BudgetError(f"{label} must be a finite number, got {value}")
            if value <= 0:
                raise BudgetError(f"{label} must be > 0, got {value}")

    def stop_reason(
        self, *, n_trials: int, clock_s: float, best_ms: float | None, since_best: int
    ) -> str | None:
        """The reason to stop now, or ``None`` to go on."""
        if self.target_ms is not None and best_ms is not None and best_ms <= self.target_ms:
            return "target"
        if self.max_trials is not None and n_trials >= self.max_trials:
            return "budget"
        if self.max_seconds is not None and clock_s >= self.max_seconds:
            return "time"
        if self.patience is not None and since_best >= self.patience:
            return "patience"
        return None

    def batch_size(self, wanted: int, n_trials: int) -> int:
        """How many to measure next: ``wanted``, capped by the remaining measurement budget."""
        if self.max_trials is None:
            return wanted
        return max(0, min(wanted, self.max_trials - n_trials))
