"""Optuna's TPE as a proposal source, warm-started from the tuning log.

Each call builds a fresh in-memory study from what is known now and asks it for candidates:

- the job's own measurements, valued ``time / best time of the job`` (failed runs: twice the
  worst ratio seen), so values are on one scale however the best moves;
- while the job is young, measurements of the same space on other devices or workloads from
  the log (the *prior*), valued by the same ratio within their own group. The prior is thinned
  as the job grows to ``prior_cap * half / (half + n)`` rows: the fastest half of them, the rest
  spread evenly over the slower ones (TPE needs bad examples too), so TPE's densities come to
  be the target's own.

Knobs are ordinal positions (numbers) or categories (strings, booleans), as in the standalone
``optuna`` strategy. A proposal outside the space's constraints is told back as a bad trial of
the throwaway study and asked again; so is a repeat. No study is kept between calls (the only
state is a call counter that seeds each one), so a replayed job proposes what the original did.
A study is rebuilt on every call, so a call costs far more than the other proposal sources;
why ``auto`` does not pool it: docs/benchmarks.md, "tuner/proposals/tpe.py".
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ktune.search_space.space import SearchSpace

__all__ = ["TPESource", "position_distributions"]


def position_distributions(space: SearchSpace) -> dict[str, Any]:
    """Optuna distributions over value positions: ordinal for numbers, categorical for strings
    and booleans; single-valued knobs are left out (their position is always 0)."""
    from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

    dists: dict[str, BaseDistribution] = {}
    for p in space.parameters:
        if len(p.values) == 1:
            continue
        if p.kind in ("int", "float"):
            dists[p.name] = IntDistribution(0, len(p.values) - 1)
        else:
            dists[p.name] = CategoricalDistribution(tuple(range(len(p.values))))
    return dists


class TPESource:
    """Candidates from Optuna's multivariate TPE over ``space``."""

    def __init__(
        self,
        space: SearchSpace,
        seed: int,
        prior: Sequence[tuple[int, float]] = (),
        *,
        prior_cap: int = 200,
        prior_half_at: int = 30,
    ) -> None:
        """``prior``: (dense index, value relative to its group's best; ``inf`` = failed)."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self.seed = seed
        self.prior = sorted(prior, key=lambda p: p[1])
        self.prior_cap = prior_cap
        self.prior_half_at = prior_half_at
        self._dists = position_distributions(space)
        self._calls = 0

    def propose(self, k: int, measured: Mapping[int, float | None], taken: set[int]) -> np.ndarray:
        """Up to ``k`` distinct indices not in ``taken``; ``measured``: the job's times (``None``
        for a failed run)."""
        import optuna

        if k <= 0 or not self._dists:
            return np.empty(0, dtype=np.int64)
        self._calls += 1
        sampler = optuna.samplers.TPESampler(
            # Optuna takes seeds below 2**32; the same as before for seeds up to 542,357
            seed=(self.seed * 7919 + self._calls) % 2**32,
            multivariate=True,
            n_startup_trials=5,
        )
        study = optuna.create_study(direction="minimize", sampler=sampler)
        trials = self._trials(measured)
        study.add_trials(trials)
        worst = max((t.value for t in trials if t.value is not None), default=2.0)
        out: list[int] = []
        chosen = set(taken)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TPE notes independent-sampling fallbacks
            for _ in range(8 * k):
                if len(out) == k:
                    break
                trial = study.ask(self._dists)
                index = self.space.indices_of_positions(self._positions(trial.params)[None, :])[0]
                if index < 0 or int(index) in chosen:
                    study.tell(trial, 2.0 * worst)  # outside the space, or nothing new: steer away
                    continue
                chosen.add(int(index))
                out.append(int(index))
                study.tell(
                    trial, state=optuna.trial.TrialState.FAIL
                )  # accepted; TPE ignores failed trials
        return np.array(out, dtype=np.int64)

    # --- building the study --------------------------------------------------------------

    def _trials(self, measured: Mapping[int, float | None]) -> list[Any]:
        import optuna

        ok = [t for t in measured.values() if t is not None and t > 0]
        best = min(ok, default=1.0)
        rows = [
            (i, (t / best) if t is not None and t > 0 else math.inf) for i, t in measured.items()
        ]
        keep = int(self.prior_cap * self.prior_half_at / (self.prior_half_at + len(measured)))
        rows += [p for p in self._thinned(keep) if p[0] not in measured]
        finite = [v for _, v in rows if math.isfinite(v)]
        fail = 2.0 * max(finite, default=1.0)
        if not rows:
            return []
        positions = self.space.positions(np.array([i for i, _ in rows], dtype=np.int64))
        names = [p.name for p in self.space.parameters]
        trials = []
        for (_, value), row in zip(rows, positions):
            params = {n: int(row[j]) for j, n in enumerate(names) if n in self._dists}
            trials.append(
                optuna.trial.create_trial(
                    params=params,
                    distributions=self._dists,
                    value=value if math.isfinite(value) else fail,
                )
            )
        return trials

    def _thinned(self, keep: int) -> list[tuple[int, float]]:
        """``keep`` prior rows: the fastest half, then the rest evenly through the others."""
        if keep >= len(self.prior):
            return list(self.prior)
        head = self.prior[: keep // 2]
        tail = self.prior[keep // 2 :]
        if keep <= len(head):
            return head
        picks = {int(p) for p in np.linspace(0, len(tail) - 1, keep - len(head))}
        return head + [tail[i] for i in sorted(picks)]

    def _positions(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([int(params.get(p.name, 0)) for p in self.space.parameters], dtype=np.int64)
