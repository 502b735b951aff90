"""Search on a cost model: propose from sources, pick a diverse batch, learn, repeat.

The base of ktune's model-guided strategies. An XGBoost cost model (``ktune.cost_model.xgb``) is
trained on this job's measurements and, when the tuning log holds measurements of the same
space (other GPUs, other workloads, earlier jobs), on those too: the target device's trials
then weigh more as they arrive (transfer; see ``ktune.cost_model.transfer``). Until the model has
something to learn from, batches are space-filling (cluster representatives of a random
sample). After that, each subclass pools candidates from its proposal sources; the adaptive
sampler (``ktune.tuner.sampling``) keeps one promising representative per cluster. A subclass may
give a share of each plan (``coordinate_share``) to one-knob moves around the best
measurements (``ktune.tuner.proposals.coordinate``), so the search also converges locally.

Tuner time is amortised: proposals are planned ``plan_size`` at a time (at least the batch
asked for), so the sources run once per plan, not per measurement, and the model is refitted
and the space scored at most once per plan. Spaces up to ``exhaustive_limit`` configs are
scored whole once per refit, and the sources (annealing, the RL agent) then read scores from
that table. When measurements are so cheap that refitting every plan would cost more than
``tuner_share`` of their time (a kernel that compiles and runs in 0.1 s), refits are spaced
further apart, up to ``max_refit_interval`` measurements (:meth:`ModelGuided.refit_interval`),
while plans stay short: between refits each plan reads the last model's table, so the one-knob
walk still moves from the best measurement every few measurements. The refit's cost is estimated
from the work it does (:meth:`ModelGuided.plan_seconds`), not read from a clock, so a seeded
job still proposes the same sequence.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ktune.cost_model.features import FeatureExtractor
from ktune.cost_model.prior import PriorLimit, limit_samples
from ktune.cost_model.samples import Sample, group_ids, relative_throughput
from ktune.cost_model.transfer import DEFAULT_LIMIT, MIN_DEVICES_FOR_COLUMNS
from ktune.cost_model.xgb import XGBCostModel
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.proposals.annealing import anneal
from ktune.tuner.proposals.coordinate import coordinate_moves
from ktune.tuner.sampling.adaptive import AdaptiveSampler
from ktune.tuner.strategies.base import Observation, SearchContext, Strategy

__all__ = ["SOURCES", "ModelGuided"]

#: where a model-guided strategy's proposals come from (``ModelGuided.sources``): the
#: space-filling start, the one-knob walk around the best measurements, the pooled sources
#: through the adaptive sampler; ``auto`` adds its escape's restart points (far and slice),
#: the walk of a restart lineage, recombinations and uniform draws, and its explorer
SOURCES = (
    "space-filling",
    "walk",
    "pooled",
    "restart",
    "slice",
    "lineage",
    "recombination",
    "smooth",
    "draw",
    "explorer",
)

#: the plan-time model of :meth:`ModelGuided.plan_seconds`, in seconds: fixed, per config
#: scored, per training row, per proposal
PLAN_S_FIXED = 0.030
PLAN_S_PER_CONFIG = 2.0e-6
PLAN_S_PER_ROW = 2.2e-5
PLAN_S_PER_PROPOSAL = 1.0e-3
#: predicted scores below this (100 times slower than the best) record no predicted time
MIN_PREDICTED_SCORE = 0.01


class ModelGuided(Strategy):
    uses_log = True
    #: space-filling measurements before an in-job model is trained (no transfer data)
    n_init: ClassVar[int] = 8
    #: proposals planned at a time (the model refits once per plan)
    plan_size: ClassVar[int] = 8
    #: the shortest plan when the log holds measurements of the space (its first plan is the
    #: transferred model's ranking alone); None: ``plan_size``
    plan_size_with_prior: ClassVar[int | None] = None
    #: spaces up to this size are scored exhaustively and their features cached
    exhaustive_limit: ClassVar[int] = 200_000
    #: the most measurements between refits of the model, however cheap measurements are
    max_refit_interval: ClassVar[int] = 64
    #: the share of the measurement time that planning (refits included) aims to stay under
    tuner_share: ClassVar[float] = 0.02
    #: share of each plan given to one-knob moves around the best measurements (0: none)
    coordinate_share: ClassVar[float] = 0.0
    #: how many of the best measurements those moves start from
    coordinate_incumbents: ClassVar[int] = 2
    #: uncertainty bonus in the acquisition
    beta: ClassVar[float] = 0.5
    #: the in-job model's bootstrap members and boosting rounds
    model_members: ClassVar[int] = 3
    model_rounds: ClassVar[int] = 40
    #: the model also sees pairwise knob ratios and products (``ldiff`` / ``lsum`` columns of
    #: ``ktune.cost_model.features``; measured for ``auto``, which turns them on)
    knob_pairs: ClassVar[bool] = False
    #: the model also sees, for each integer knob whose values are not all powers of two,
    #: whether the value is one (``pow2:*``)
    pow2_columns: ClassVar[bool] = False
    #: how much of the log's prior a job trains on (per group and in all), so that start-up
    #: and refits stay cheap however large the log grows (``ktune.cost_model.prior``)
    prior_limit: ClassVar[PriorLimit | None] = DEFAULT_LIMIT

    def __init__(
        self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
    ) -> None:
        super().__init__(space, seed=seed, context=context)
        ctx = self.context
        self.workload = ctx.workload or Workload("job", (1,))
        self.device = ctx.device or "target"
        self.spec = ctx.spec
        prior = [s for s in ctx.prior if s.usable]
        if self.prior_limit is not None:
            # a job's context is already bounded by the same policy and seed (a no-op then);
            # a prior handed in directly (the Python API, tests) is bounded here
            prior = limit_samples(
                prior,
                self.prior_limit,
                target=(self.workload.key, self.device),
                target_spec=self.spec,
                seed=seed or 0,
            )
        known = {s.device for s in prior if s.spec is not None and s.device != self.device}
        extractor = FeatureExtractor(
            space.parameters,
            device_features=len(known) >= MIN_DEVICES_FOR_COLUMNS,
            knob_pairs=self.knob_pairs,
            pow2=self.pow2_columns,
        )
        # A small ensemble on one thread: the model refits once per plan on at most a few
        # thousand rows, and OpenMP threads only contend with the measurements on small data.
        self.model = XGBCostModel(
            extractor,
            target=(self.workload.key, self.device),
            target_spec=self.spec,
            seed=seed or 0,
            n_members=self.model_members,
            n_rounds=self.model_rounds,
            nthread=1,
        )
        self._prior = prior
        self._has_prior = any(s.ok for s in prior)
        if self._has_prior:
            self.model.fit(prior)
        self._own: list[Sample] = []
        self._unfitted: list[Sample] = []  # told since the last refit
        self._obs: dict[int, Observation] = {}
        self._plan: list[int] = []
        self._predicted: dict[int, float] = {}  # index -> predicted ms, when planned
        self._handed: set[int] = set()
        #: the source that planned each config handed out (``SOURCES``), for diagnostics
        #: (``benchmarks/measurement_sources.py``); it never changes what is proposed
        self.sources: dict[int, str] = {}
        self._features: np.ndarray | None = None
        self._table: tuple[np.ndarray, np.ndarray] | None = (
            None  # (score, uncertainty) of all configs
        )
        self.sampler = AdaptiveSampler(space, self.rng, beta=self.beta)

    # --- ask / tell ---------------------------------------------------------------------

    def ask(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            if not self._plan:
                self._plan = self._make_plan(max(n - len(out), self.plan_length()))
                if not self._plan:
                    break
                self._note_predictions(self._plan)
            index = self._plan.pop(0)
            if index not in self._obs and index not in self._handed:
                self._handed.add(index)
                out.append(index)
        return out

    def predicted_ms(self, index: int) -> float | None:
        return self._predicted.get(index)

    def _note_predictions(self, plan: Sequence[int]) -> None:
        """The time the model predicts for each planned config, kept for the job to record:
        its label is a group's best time over the config's, so the predicted time is this
        job's best measured time over the predicted score (none before a fitted model and an
        ok measurement)."""
        best = min((o.time_ms for o in self._obs.values() if o.ok and o.time_ms), default=None)
        if best is None or not self.model.fitted:
            return
        score, _ = self.predict(np.asarray(plan, dtype=np.int64))
        for index, s in zip(plan, score.tolist()):
            if s >= MIN_PREDICTED_SCORE:
                self._predicted[int(index)] = best / s

    def tell(self, observations: Sequence[Observation]) -> None:
        new = [o for o in observations if o.index not in self._obs]
        if not new:
            return
        for o in new:
            self._obs[o.index] = o
            self._handed.add(o.index)
        configs = self.space.configs([o.index for o in new])
        samples = [
            Sample(c, self.workload, self.device, self.spec, o.status, o.time_ms)
            for c, o in zip(configs, new)
        ]
        self._own.extend(samples)
        self._unfitted.extend(samples)

    def _refresh(self) -> bool:
        """Bring the model up to date with what was told since its last fit and rescore, once
        ``refit_interval`` measurements are new (or for its first fit); whether it refitted."""
        if not self._unfitted:
            return False
        if self.model.fitted:
            if len(self._unfitted) < self.refit_interval():
                return False  # measurements are cheap: plan on the last model's table for now
            self.model.update(self._unfitted)
        elif sum(s.ok for s in self._own) >= 2 and len(self._own) >= self.n_init:
            self.model.fit(self._prior + self._own)
        else:
            return False
        self._unfitted = []
        self._table = None
        return True

    # --- planning -----------------------------------------------------------------------

    def plan_length(self) -> int:
        """Proposals to plan at once: ``plan_size``, or ``plan_size_with_prior`` when the log
        holds measurements of the space."""
        if self._has_prior and self.plan_size_with_prior is not None:
            return self.plan_size_with_prior
        return self.plan_size

    def refit_interval(self) -> int:
        """Measurements between refits of the model: one plan (``plan_length``), or more when
        measurements are so cheap that refitting every plan would cost more than
        ``tuner_share`` of their time: the smallest ``n`` with ``plan_seconds(n) / n <=
        tuner_share * median measurement cost``, at most ``max_refit_interval``. (Plans between
        refits cost ``PLAN_S_PER_PROPOSAL`` per proposal, which the estimate counts.)"""
        shortest = self.plan_length()
        costs = [o.cost_s for o in self._obs.values() if o.cost_s > 0]
        if not costs:
            return shortest
        per_proposal = self.tuner_share * float(np.median(costs)) - PLAN_S_PER_PROPOSAL
        if per_proposal <= 0:
            return self.max_refit_interval
        need = math.ceil(self.plan_seconds(0) / per_proposal)
        return int(min(self.max_refit_interval, max(shortest, need)))

    def plan_seconds(self, n: int) -> float:
        """Estimated time of a plan of ``n`` proposals on a slow machine: a linear model in the
        configs scored per plan, the model's training rows and ``n``, its constants fitted (rounded
        up) to this strategy's timed plans (docs/benchmarks.md, "Tuner time"). An estimate, not
        a clock reading, so that plan lengths, and the proposals, depend on the seed and the
        measurements alone."""
        scored = min(len(self.space), self.exhaustive_limit)
        rows = len(self._prior) + len(self._own)
        return (
            PLAN_S_FIXED
            + PLAN_S_PER_CONFIG * scored
            + PLAN_S_PER_ROW * rows
            + PLAN_S_PER_PROPOSAL * n
        )

    def _taken(self) -> set[int]:
        return set(self._obs) | self._handed

    def _make_plan(self, n: int) -> list[int]:
        taken = self._taken()
        remaining = len(self.space) - len(taken)
        if remaining <= 0:
            return []
        n = min(n, remaining)
        self._refresh()
        if not self.model.fitted:
            return self._space_filling(n, taken)
        moves = self._local_moves(round(self.coordinate_share * n), taken)
        taken = taken | set(moves)
        n -= len(moves)
        if n <= 0 or len(taken) >= len(self.space):
            return moves
        wide = self._wide_picks(n, taken)
        moves += wide
        taken = taken | set(wide)
        n -= len(wide)
        if n <= 0 or len(taken) >= len(self.space):
            return moves
        candidates = self._candidates(n, taken)
        candidates = (
            candidates[~np.isin(candidates, np.fromiter(taken, np.int64))]
            if len(candidates)
            else candidates
        )
        if len(np.unique(candidates)) < n:
            extra = self.space.sample(
                n, self.rng, exclude=np.fromiter(taken | set(candidates.tolist()), np.int64)
            )
            candidates = np.concatenate([candidates, extra])
        score, uncertainty = self.predict(candidates)
        return moves + self._noted(
            self.sampler.select(candidates, score, uncertainty, n, taken), "pooled"
        )

    def _noted(self, picks: list[int], source: str) -> list[int]:
        """``picks``, each noted as planned by ``source`` (one of ``SOURCES``)."""
        for index in picks:
            self.sources[int(index)] = source
        return picks

    def _space_filling(self, n: int, taken: set[int]) -> list[int]:
        """``n`` spread-out unmeasured configs (no model yet): cluster representatives of a
        uniform sample of the valid space."""
        remaining = len(self.space) - len(taken)
        pool = self._runnable(
            self.space.sample(
                min(remaining, 32 * n), self.rng, exclude=np.fromiter(taken, np.int64)
            ),
            n,
        )
        zeros = np.zeros(len(pool))
        return self._noted(self.sampler.select(pool, zeros, zeros, n, taken), "space-filling")

    def _runnable(self, pool: np.ndarray, n: int) -> np.ndarray:
        """``pool`` less the configs expected to fail, keeping at least ``n`` (all of it
        here: no failure model; ``auto`` has one)."""
        return pool

    def _local_moves(self, k: int, taken: set[int]) -> list[int]:
        """Up to ``k`` one-knob moves around the best measurements (``coordinate_share``)."""
        moves = coordinate_moves(
            self.space,
            self.acquisition,
            self.best_measured(self.coordinate_incumbents),
            taken,
            k,
        )
        return self._noted(moves, "walk")

    def _wide_picks(self, n: int, taken: set[int]) -> list[int]:
        """Proposals made outside the pooled sources, before them (none here; ``auto`` gives
        a stalled search some)."""
        return []

    @abstractmethod
    def _candidates(self, n: int, taken: set[int]) -> np.ndarray:
        """Unmeasured dense indices proposed by this strategy's sources (a few times ``n``)."""

    # --- the model and the sources ------------------------------------------------------

    def predict(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicted ``(score, uncertainty)``; higher score = predicted faster."""
        indices = np.asarray(indices, dtype=np.int64)
        if len(self.space) <= self.exhaustive_limit:
            if self._table is None:
                self._table = self.model.predict(self.space_features())
            return self._table[0][indices], self._table[1][indices]
        return self.model.predict(
            self.model.extractor.for_space(self.space, indices, self.workload, self.spec)
        )

    def space_features(self) -> np.ndarray:
        """The features of every config of the space (computed once; small spaces only)."""
        if self._features is None:
            self._features = self.model.extractor.for_space(
                self.space, None, self.workload, self.spec
            )
        return self._features

    def score(self, indices: np.ndarray) -> np.ndarray:
        return self.predict(indices)[0]

    def acquisition(self, indices: np.ndarray) -> np.ndarray:
        """Predicted score plus the uncertainty bonus (what the sampler ranks by)."""
        score, uncertainty = self.predict(indices)
        return score + self.beta * uncertainty

    def best_measured(self, k: int) -> np.ndarray:
        ok = sorted((o.time_ms, i) for i, o in self._obs.items() if o.ok)
        return np.array([i for _, i in ok[:k]], dtype=np.int64)

    def top_predicted(self, k: int, taken: set[int]) -> np.ndarray:
        """The ``k`` unmeasured configs with the best acquisition, scoring the whole space (small
        spaces) or a uniform sample of it (large ones)."""
        if len(self.space) <= self.exhaustive_limit:
            pool = np.arange(len(self.space))
        else:
            pool = self.space.sample(self.exhaustive_limit, self.rng)
        pool = pool[~np.isin(pool, np.fromiter(taken, np.int64))]
        if len(pool) == 0:
            return pool
        order = np.argsort(-self.acquisition(pool), kind="stable")
        return pool[order[:k]]

    def local(self, k: int, taken: set[int], best: int = 3) -> np.ndarray:
        """One-knob neighbours of the best measured configs, best predicted first."""
        around = {
            int(nb)
            for i in self.best_measured(best)
            for nb in self.space.neighbours(int(i), "hamming")
        }
        pool = np.array(sorted(around - taken), dtype=np.int64)
        if len(pool) == 0:
            return pool
        order = np.argsort(-self.score(pool), kind="stable")
        return pool[order[:k]]

    def prior_ratios(self) -> list[tuple[int, float]]:
        """The log's prior as (dense index, time / best time of its group; ``inf`` = failed),
        for the configs this space holds (for sources that read the prior directly)."""
        if not self._prior:
            return []
        ids, _ = group_ids(self._prior)
        throughput = relative_throughput(self._prior, ids)  # best / time, 0 when failed
        has_ok = np.bincount(ids, weights=[s.ok for s in self._prior]) > 0
        out: list[tuple[int, float]] = []
        for s, g, r in zip(self._prior, ids, throughput):
            index = self.space.index(s.config)
            if index is not None and has_ok[g]:
                out.append((index, 1.0 / r if r > 0 else math.inf))
        return out

    def measured_times(self) -> dict[int, float | None]:
        """This job's measurements: index -> time (``None`` for a failed run)."""
        return {i: (o.time_ms if o.ok else None) for i, o in self._obs.items()}

    def annealed(self, k: int, taken: set[int], chains: int = 16) -> np.ndarray:
        """Model-based simulated annealing from the best measured and some random configs."""
        starts = np.concatenate(
            [self.best_measured(chains // 2), self.space.sample(chains // 2, self.rng)]
        )
        found, _ = anneal(self.space, self.score, starts, self.rng, n=k + len(taken))
        return found[~np.isin(found, np.fromiter(taken, np.int64))][:k]
