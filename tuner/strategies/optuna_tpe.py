"""Optuna's TPE over a constrained space: every proposal valid and new.

Numeric knobs are exposed to TPE as ordinal positions in their value lists (so neighbouring
values share density), strings and booleans as categories. A proposal that violates the space's
constraints is told back as an infeasible trial (TPE's ``constraints_func``), so TPE learns to
avoid that region, and so is every failed measurement (``Trial.set_constraint``). A proposal of
an already measured configuration is discarded (told as ``FAIL``, which TPE ignores); after a
few such repeats the slot is filled with an unmeasured neighbour of the last proposal, or a
random unmeasured configuration, enqueued into the study so its bookkeeping stays exact.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.trial import Trial, TrialState

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals.tpe import position_distributions
from ktune.tuner.strategies.base import Observation, SearchContext, Strategy

__all__ = ["OptunaTPE"]

_VIOLATION = "violation"


class OptunaTPE(Strategy):
    name = "optuna"
    summary = "Optuna TPE (multivariate, constant liar) with constraints told as infeasible"

    #: proposals tried per slot before falling back to an unmeasured neighbour
    max_retries = 8

    def __init__(
        self,
        space: SearchSpace,
        *,
        seed: int | None = None,
        context: SearchContext | None = None,
        n_startup_trials: int = 10,
    ) -> None:
        super().__init__(space, seed=seed, context=context)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=n_startup_trials, multivariate=True, constant_liar=True
        )
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._dists = position_distributions(space)
        self._seen: set[int] = set()
        self._pending: dict[int, Trial] = {}
        self._worst_ms = 1.0

    # -- encoding ---------------------------------------------------------------------------
    def _index_of(self, positions: dict[str, Any]) -> int | None:
        config = {p.name: p.values[int(positions.get(p.name, 0))] for p in self.space.parameters}
        return self.space.index(config)

    def _positions_of(self, index: int) -> dict[str, int]:
        row = self.space.positions(np.array([index]))[0]
        return {
            p.name: int(row[j])
            for j, p in enumerate(self.space.parameters)
            if p.name in self._dists
        }

    # -- ask --------------------------------------------------------------------------------
    def ask(self, n: int) -> list[int]:
        picks: list[int] = []
        while len(picks) < n and len(self._seen) < len(self.space):
            picks.append(self._propose_one())
        return picks

    def _propose_one(self) -> int:
        last_valid: int | None = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TPE warns about independent sampling fallbacks
            for _ in range(self.max_retries):
                trial = self._study.ask(self._dists)
                index = self._index_of(trial.params)
                if index is None:
                    trial.set_constraint(_VIOLATION, 1.0)
                    self._study.tell(trial, self._worst_ms)
                    continue
                if index in self._seen:
                    self._study.tell(trial, state=TrialState.FAIL)
                    last_valid = index
                    continue
                return self._accept(index, trial)
            index = self._fallback(last_valid)
            self._study.enqueue_trial(self._positions_of(index))
            return self._accept(index, self._study.ask(self._dists))

    def _accept(self, index: int, trial: Trial) -> int:
        self._seen.add(index)
        self._pending[index] = trial
        return index

    def _fallback(self, near: int | None) -> int:
        if near is not None:
            around = [
                int(i) for i in self.space.neighbours(near, "hamming") if int(i) not in self._seen
            ]
            if around:
                return around[int(self.rng.integers(len(around)))]
        exclude = np.fromiter(self._seen, dtype=np.int64, count=len(self._seen))
        return int(self.space.sample(1, self.rng, exclude=exclude)[0])

    # -- tell -------------------------------------------------------------------------------
    def tell(self, observations: Sequence[Observation]) -> None:
        for obs in observations:
            if obs.ok:
                self._worst_ms = max(self._worst_ms, float(obs.time_ms))  # type: ignore[arg-type]
        for obs in observations:
            value = float(obs.time_ms) if obs.ok else self._worst_ms  # type: ignore[arg-type]
            violation = 0.0 if obs.ok else 1.0
            self._seen.add(obs.index)
            trial = self._pending.pop(obs.index, None)
            if trial is not None:
                trial.set_constraint(_VIOLATION, violation)
                self._study.tell(trial, value)
                continue
            self._study.add_trial(
                optuna.trial.create_trial(
                    params=self._positions_of(obs.index),
                    distributions=self._dists,
                    value=value,
                    constraints={_VIOLATION: violation},
                )
            )
