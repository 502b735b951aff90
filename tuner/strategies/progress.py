"""Book-keeping for ``auto``'s escape: is the search stuck, and is its model better than chance.

``Progress`` counts measurements since the job's best last improved by more than
``min_gain`` (a run that creeps by 0.1% per find on a plateau is stuck all the same), and
follows one *restart lineage*: a restart point and the one-knob moves made from it, with the
best it has found and how many of its measurements ago. ``RankTrust`` pairs the model's score
of each proposal, taken when it was planned, with the measured result, and says whether their
rank correlation is above what chance gives for that many pairs (one standard error,
1 / sqrt(n - 1), on at least ``min_pairs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Progress", "RankTrust"]


@dataclass
class Progress:
    #: a find counts as progress when it beats the best by more than this fraction
    min_gain: float = 0.01
    told: int = 0
    best_ms: float = math.inf
    gained_at: int = 0
    lineage: set[int] = field(default_factory=set)
    #: where the current lineage started
    origin: int | None = None
    lineage_best: tuple[float, int] | None = None
    #: lineage measurements since its best last improved
    lineage_idle: int = 0
    restarts: int = 0

    def tell(self, index: int, time_ms: float | None) -> None:
        self.told += 1
        if time_ms is not None and time_ms < self.best_ms * (1 - self.min_gain):
            self.gained_at = self.told
        if time_ms is not None:
            self.best_ms = min(self.best_ms, time_ms)
        if index in self.lineage:
            if time_ms is not None and (
                self.lineage_best is None or time_ms < self.lineage_best[0]
            ):
                self.lineage_best = (time_ms, index)
                self.lineage_idle = 0
            else:
                self.lineage_idle += 1

    def idle(self) -> int:
        """Measurements since the last progress."""
        return self.told - self.gained_at

    def restart(self, index: int, time_ms: float | None = None) -> None:
        """Begin a new lineage at ``index`` (the old one is forgotten); ``time_ms`` when it is
        measured already."""
        self.lineage = {index}
        self.origin = index
        self.lineage_best = None if time_ms is None else (time_ms, index)
        self.lineage_idle = 0
        self.restarts += 1


@dataclass
class RankTrust:
    min_pairs: int = 6
    predicted: dict[int, float] = field(default_factory=dict)
    pairs: list[tuple[float, float]] = field(default_factory=list)
    trusted: bool = False

    def planned(self, indices: np.ndarray, scores: np.ndarray) -> None:
        for i, s in zip(indices.tolist(), np.asarray(scores).tolist()):
            self.predicted.setdefault(int(i), float(s))

    def tell(self, index: int, time_ms: float | None) -> None:
        """Pair the measured result with its prediction; a failed run ranks last."""
        score = self.predicted.pop(index, None)
        if score is None or self.trusted:
            return
        self.pairs.append((score, -math.log(time_ms) if time_ms else -math.inf))
        n = len(self.pairs)
        if n >= self.min_pairs:
            rho = _spearman(np.array(self.pairs))
            self.trusted = rho > 1.0 / math.sqrt(n - 1)


def _spearman(pairs: np.ndarray) -> float:
    ranks = [np.argsort(np.argsort(pairs[:, j], kind="stable")) for j in (0, 1)]
    a, b = (r - r.mean() for r in ranks)
    denom = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else 0.0
