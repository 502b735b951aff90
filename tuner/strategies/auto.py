"""ktune's default: every proposal source pooled, adaptive sampling picks the batch.

Half of each plan are one-knob moves around the two best measurements, a knob at a time, the
model choosing each knob's value (``ktune.tuner.proposals.coordinate``): the search converges
locally. The other half looks elsewhere. In a plan that is not stalled, its first proposal is
the config of best expected improvement on a smooth model, a Gaussian process of the job's ok
measurements over the knobs' value positions (``ktune.cost_model.smooth``), which looks between
and beyond the measurements where the trees extrapolate flat; the rest comes from the pooled
sources through the adaptive sampler: the best unmeasured configs by acquisition over the whole
space (or a large sample of it), one-knob neighbours of the best measurements, model-based
annealing, and the PPO agent (drawn once per fit of the model). A stalled plan restarts or draws
instead (the escape, below). With measurements of the same space in the log (other GPUs), the
first batch is already ranked by the transferred model.

How the share was chosen: docs/benchmarks.md, "tuner/strategies/auto.py".

**Insurance against a misleading log.** Transfer assumes the target GPU ranks the space like
the GPUs in the log. When it does not (an AMD GPU after NVIDIA ones), the first incumbents sit
in the other GPUs' favourite region and the walk around them may never leave it. So, with a
prior, one proposal in ``explorer_share`` after the first ``explorer_after`` comes from an
*explorer*: a second ``auto`` that ignores the log and sees only its own measurements, so
its incumbents are its own and not the prior's. Every measurement, the explorer's included,
teaches the main search, so once the explorer finds a faster region the main walk moves there.
Without a prior there is no explorer and nothing changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ktune.cost_model.failures import FailureModel
from ktune.cost_model.smooth import SmoothModel, expected_improvement
from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals.coordinate import coordinate_moves
from ktune.tuner.proposals.recombination import recombine
from ktune.tuner.proposals.restart import restart_point
from ktune.tuner.proposals.rl_agent import KnobMoveAgent
from ktune.tuner.proposals.slices import flip_effects, slice_start
from ktune.tuner.strategies.base import Observation, SearchContext
from ktune.tuner.strategies.model_guided import ModelGuided
from ktune.tuner.strategies.progress import Progress, RankTrust

__all__ = ["AutoSearch"]

#: added to the job's seed for the explorer's, so the two do not draw the same random configs
EXPLORER_SEED_OFFSET = 7919


class AutoSearch(ModelGuided):
    name = "auto"
    coordinate_share = 0.5
    #: with a prior in the log, the share of proposals (after ``explorer_after``) that come
    #: from a search ignoring the log (0: never)
    explorer_share: ClassVar[float] = 0.125
    summary = (
        "model-guided one-knob moves + a Gaussian process's expected improvement + pooled"
        " proposals (model ranking, annealing, PPO agent) + adaptive sampling;"
        f" with a log, 1 in {round(1 / explorer_share)} from an explorer that ignores it"
    )
    #: proposals made by the transferred model alone before the explorer's first
    explorer_after: ClassVar[int] = 8
    #: proposals planned at once (however cheap measurements are; the model's refits are
    #: spaced out instead, see ``refit_interval``): 4 splits local moves and global proposals
    #: 2:2 and refits the model twice as often as 8 did, which the first 50 measurements gain
    #: most from
    plan_size: ClassVar[int] = 4
    #: the shortest plan with a prior in the log: its first plan is the transferred model's
    #: ranking alone (nothing measured to walk around yet), and transfer was measured with 8
    plan_size_with_prior: ClassVar[int | None] = 8
    #: the escape (restarts when stalled, random draws and recombinations, the model's ranking
    #: once it beats chance); off, ``auto`` plans as it did before it (for comparisons)
    escape: ClassVar[bool] = True
    #: stalled after this many measurements without progress, per knob that varies
    patience_per_knob: ClassVar[float] = 2.0
    #: and after no more than this share of the measurements the budget has left (None: the
    #: knobs alone decide), so that a stall late in a short job still leaves room to restart
    patience_share_of_left: ClassVar[float | None] = 0.25
    #: the fewest measurements without progress that count as a stall
    min_patience: ClassVar[int] = 8
    #: while stalled, the share of the non-local proposals drawn uniformly from the configs not
    #: predicted to fail (a floor of random search where the model misleads)
    stalled_random_share: ClassVar[float] = 0.25
    #: while stalled, every other plan's random draw is instead a recombination of the best
    #: measurements (``ktune.tuner.proposals.recombination``): the model's pick among
    #: crossovers of these many best configs (0: never)
    recombination_parents: ClassVar[int] = 4
    #: the model also sees log2 ratios and products of knob pairs, so it can express "tile
    #: over threads" for knobs with no named derived column (docs/benchmarks.md, "Knob-pair
    #: columns": within 5% 0.796 against 0.784 over 28 replayed spaces, at the edge of noise)
    knob_pairs: ClassVar[bool] = True
    #: the model also sees whether each ``align2`` knob's value is a power of two, which
    #: ``align2`` alone does not say (192 and 64 share an alignment): on AMD convolution
    #: spaces every non-power-of-two block width runs over 10x slower (docs/benchmarks.md,
    #: "What the seeds alone can make of the targets" and "A second held-out set": within 5%
    #: +0.026 and +0.012, standard error 0.013 each, on 24 replayed spaces, two held-out sets)
    pow2_columns: ClassVar[bool] = True
    #: restart points are the best (optimistically) of this many uniform draws far from the
    #: incumbents: few enough that the model's bias, which stalled the walk, does not decide
    #: alone where it starts again
    restart_pool: ClassVar[int] = 64
    #: every other restart pins a two-valued knob whose measured flip effect (median time ratio
    #: of measured pairs differing in it alone) is above this, at the value the best config
    #: lacks, and walks that slice (``ktune.tuner.proposals.slices``; None: far restarts only)
    slice_min_effect: ClassVar[float | None] = 1.25
    #: the share of plans (not stalled, the model trusted) whose global proposal is the smooth
    #: model's (``ktune.cost_model.smooth``: expected improvement of a Gaussian process on
    #: value positions) instead of the pooled sources' (0: never)
    smooth_share: ClassVar[float] = 1.0
    #: the most configs the smooth model scores per proposal (a uniform sample beyond it)
    smooth_pool: ClassVar[int] = 20_000
    #: whether space-filling picks (before the model ranks better than chance) skip configs
    #: the failure model expects to fail, as the stalled draws and restarts do
    screen_space_filling: ClassVar[bool] = True
    #: whether the pooled sources draw their candidates once per fit of the model and plans
    #: between refits reuse the draw (``_candidates``; False: a new draw every plan)
    pool_once_per_fit: ClassVar[bool] = True

    def __init__(
        self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
    ) -> None:
        super().__init__(space, seed=seed, context=context)
        self.agent = KnobMoveAgent(space, self.rng)
        self.explorer: _Explorer | None = None
        if self.explorer_share > 0 and self._has_prior:
            self.explorer = _Explorer(self, None if seed is None else seed + EXPLORER_SEED_OFFSET)
        self._proposed = 0  # proposals handed out, the explorer's included
        self._explored: set[int] = set()  # the explorer's proposals
        self.knobs = sum(len(p.values) > 1 for p in space.parameters)
        self.patience = max(self.min_patience, math.ceil(self.patience_per_knob * self.knobs))
        self.progress = Progress()
        self.trust = RankTrust()
        self.failures = FailureModel(seed=seed or 0)
        self._fail_table: np.ndarray | None = None  # P(fail) of every config (small spaces)
        self._failures_new = False  # a failure told since the cost model's last refit
        self._failures_stale = False  # the failure model is due a refit
        self.pin: int | None = None  # the knob the current lineage keeps fixed
        self.pinned: set[int] = set()  # knobs a slice restart has pinned (once each)
        self._recombined_last = False  # the last stalled plan's draw was a recombination
        self.smooth = SmoothModel()
        self._smooth_plans = 0  # plans that could have had a smooth proposal
        self._pooled: np.ndarray | None = None  # the pooled sources' candidates of this fit

    def _explorers_turn(self) -> bool:
        """Whether proposal number ``_proposed`` is the explorer's: one in ``explorer_share``
        after the first ``explorer_after``, spread evenly."""
        if self.explorer is None or self._proposed < self.explorer_after:
            return False
        j = self._proposed - self.explorer_after
        return math.floor((j + 1) * self.explorer_share) > math.floor(j * self.explorer_share)

    def ask(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            found = self._explore() if self._explorers_turn() else []
            if not found:
                found = super().ask(1)
            if not found:
                break
            out.append(found[0])
            self._proposed += 1
        return out

    def _explore(self) -> list[int]:
        """The explorer's next proposal (none when it has nothing new to give)."""
        assert self.explorer is not None
        self.explorer.hand_out(self._taken())
        found = self._noted(self.explorer.ask(1), "explorer")
        self._handed.update(found)
        self._explored.update(found)
        return found

    def predicted_ms(self, index: int) -> float | None:
        if self.explorer is not None and index in self._explored:
            return self.explorer.predicted_ms(index)
        return super().predicted_ms(index)

    def tell(self, observations: Sequence[Observation]) -> None:
        for o in observations:
            if o.index not in self._obs:
                time_ms = o.time_ms if o.ok else None
                self.progress.tell(o.index, time_ms)
                self.trust.tell(o.index, time_ms)
                self._failures_new |= not o.ok
        super().tell(observations)
        if self.explorer is not None:
            own = [o for o in observations if o.index in self._explored]
            if own:
                self.explorer.tell(own)

    def _refresh(self) -> bool:
        """The cost model's refit; the failure model is due its own after a refit that follows
        new failures, so it too refits once per ``refit_interval`` at most."""
        refitted = super()._refresh()
        if refitted:
            self._pooled = None
        if refitted and self._failures_new:
            self._failures_new, self._failures_stale = False, True
        return refitted

    # --- the escape -----------------------------------------------------------------------

    def stalled(self) -> bool:
        return self.escape and self.progress.idle() >= self.patience_now()

    def patience_now(self) -> int:
        """Measurements without progress that make a stall now: ``patience`` (by the knobs),
        capped at ``patience_share_of_left`` of the job's budget left, never under
        ``min_patience``."""
        budget, share = self.context.max_trials, self.patience_share_of_left
        if budget is None or share is None:
            return self.patience
        left = max(0, budget - self.progress.told)
        return max(self.min_patience, min(self.patience, math.ceil(share * left)))

    def fail_probability(self, indices: np.ndarray) -> np.ndarray:
        """P(fail) of ``indices`` by the failure model (zeros until it has seen failures)."""
        indices = np.asarray(indices, dtype=np.int64)
        if self._failures_stale:
            self._failures_stale = False
            self._fail_table = None
            own = np.fromiter(self._obs, np.int64, len(self._obs))
            failed = np.array([not self._obs[int(i)].ok for i in own])
            if not self.failures.fit(self._features_of(own), failed):
                return np.zeros(len(indices))
        if not self.failures.fitted:
            return np.zeros(len(indices))
        if len(self.space) <= self.exhaustive_limit:
            if self._fail_table is None:
                table = self.failures.predict(self.space_features())
                assert table is not None
                self._fail_table = table
            known: np.ndarray = self._fail_table[indices]
            return known
        found = self.failures.predict(self._features_of(indices))
        return np.zeros(len(indices)) if found is None else found

    def _runnable(self, pool: np.ndarray, n: int) -> np.ndarray:
        """``pool`` less the configs the failure model expects to fail (P > 1/2), unless
        fewer than ``n`` would be left: space-filling picks spread over what can run."""
        if not self.screen_space_filling or len(pool) == 0:
            return pool
        runs = self.fail_probability(pool) <= 0.5
        return pool[runs] if runs.sum() >= n else pool

    def _features_of(self, indices: np.ndarray) -> np.ndarray:
        if len(self.space) <= self.exhaustive_limit:
            rows: np.ndarray = self.space_features()[indices]
            return rows
        return self.model.extractor.for_space(self.space, indices, self.workload, self.spec)

    def _optimistic(self, indices: np.ndarray) -> np.ndarray:
        """Acquisition with a widened uncertainty bonus, for restart points."""
        score, uncertainty = self.predict(indices)
        return score + 4 * self.beta * uncertainty

    def _local_moves(self, k: int, taken: set[int]) -> list[int]:
        """One-knob moves around the best measurements; while stalled, most of them around the
        current restart lineage instead (a new restart once the lineage has gone a knob sweep
        without finding better)."""
        if not self.stalled() or k <= 0:
            return super()._local_moves(k, taken)
        progress = self.progress
        picks: list[int] = []
        if (
            not progress.lineage
            or progress.lineage_idle > self.knobs
            or len(progress.lineage) > 2 * self.knobs
        ):
            found = self._restart(taken)
            if found is None:
                return []
            picks += found
        start = self._lineage_best()
        if len(start):
            walk = coordinate_moves(
                self.space,
                self.acquisition,
                start,
                taken,
                math.ceil(2 * k / 3) - len(picks),
                fixed=() if self.pin is None else (self.pin,),
            )
            progress.lineage.update(walk)
            picks += self._noted(walk, "lineage")
        return picks + super()._local_moves(k - len(picks), taken | set(picks))

    def _restart(self, taken: set[int]) -> list[int] | None:
        """Begin a new lineage: every other restart (the first included) a slice restart when
        a knob qualifies, otherwise far from the incumbents. Returns what to measure now (the
        restart point, none when it is measured already); ``None`` when nothing is left."""
        self.pin = None
        if self.slice_min_effect is not None and self.progress.restarts % 2 == 0:
            found = self._slice_restart(taken)
            if found is not None:
                return found
        point = restart_point(
            self.space,
            self._optimistic,
            np.concatenate([self.best_measured(3), self._lineage_best()]),
            taken,
            self.rng,
            min_distance=max(1, math.ceil(self.knobs / 2)),
            fail_probability=self.fail_probability,
            pool=self.restart_pool,
        )
        if point is None:
            return None
        self.progress.restart(point)
        return self._noted([point], "restart")

    def _slice_restart(self, taken: set[int]) -> list[int] | None:
        """Pin the unpinned two-valued knob with the largest measured flip effect (above
        ``slice_min_effect``) at the value the best config lacks, and start the lineage at the
        best config of that slice (``ktune.tuner.proposals.slices``); ``None`` when no knob
        qualifies."""
        assert self.slice_min_effect is not None
        times = {i: t for i, t in self.measured_times().items() if t}
        best = self.best_measured(1)
        if not len(best):
            return None
        here = self.space.positions(best)[0]
        effects = flip_effects(self.space, times)
        for knob in sorted(effects, key=lambda j: -effects[j]):
            if effects[knob] <= self.slice_min_effect or knob in self.pinned:
                continue
            self.pinned.add(knob)
            found = slice_start(
                self.space, self._optimistic, knob, 1 - int(here[knob]), times, taken, self.rng
            )
            if found is None:
                continue
            start, measured = found
            self.pin = knob
            self.progress.restart(start, times[start] if measured else None)
            return [] if measured else self._noted([start], "slice")
        return None

    def _lineage_best(self) -> np.ndarray:
        best = self.progress.lineage_best
        return np.array([] if best is None else [best[1]], dtype=np.int64)

    def _wide_picks(self, n: int, taken: set[int]) -> list[int]:
        """While stalled, a share of the plan drawn uniformly among configs not predicted to
        fail, every other plan a recombination of the best measurements instead (screened by the
        failure model too); before the model ranks better than chance, space-filling picks
        instead of its ranking."""
        if self.escape and not self.trust.trusted:
            return self._space_filling(n, taken)
        if not self.stalled():
            return self._smooth_pick(taken) if self._smooth_turn() else []
        if self.recombination_parents > 0:
            self._recombined_last = not self._recombined_last
            if self._recombined_last:
                found = recombine(
                    self.space,
                    self.acquisition,
                    self.best_measured(self.recombination_parents),
                    taken,
                    self.rng,
                    fail_probability=self.fail_probability,
                )
                if found is not None:
                    return self._noted([found], "recombination")
        k = max(1, round(self.stalled_random_share * n))
        pool = self.space.sample(4 * k, self.rng, exclude=np.fromiter(taken, np.int64))
        if len(pool) == 0:
            return []
        runs = self.fail_probability(pool) <= 0.5
        pool = np.concatenate([pool[runs], pool[~runs]])
        return self._noted([int(i) for i in pool[:k]], "draw")

    def _smooth_turn(self) -> bool:
        """Whether this plan's global proposal is the smooth model's (``smooth_share`` of
        plans, spread evenly)."""
        if self.smooth_share <= 0:
            return False
        j = self._smooth_plans
        self._smooth_plans += 1
        return math.floor((j + 1) * self.smooth_share) > math.floor(j * self.smooth_share)

    def _smooth_pick(self, taken: set[int]) -> list[int]:
        """The unmeasured config of best expected improvement on the smooth model fitted to
        this job's ok measurements, among those not predicted to fail."""
        times = {i: t for i, t in self.measured_times().items() if t}
        if len(times) < 3:
            return []
        own = np.fromiter(times, np.int64, len(times))
        log_time = np.log(np.fromiter(times.values(), np.float64, len(times)))
        if not self.smooth.fit(self._scaled(own), log_time):
            return []
        if len(self.space) <= self.smooth_pool:
            pool = np.arange(len(self.space), dtype=np.int64)
            pool = pool[~np.isin(pool, np.fromiter(taken, np.int64, len(taken)))]
        else:
            pool = self.space.sample(
                self.smooth_pool, self.rng, exclude=np.fromiter(taken, np.int64)
            )
        if len(pool) == 0:
            return []
        pool = pool[self.fail_probability(pool) <= 0.5]
        if len(pool) == 0:
            return []
        mean, std = self.smooth.predict(self._scaled(pool))
        gain = expected_improvement(mean, std, float(log_time.min()))
        return self._noted([int(pool[int(np.argmax(gain))])], "smooth")

    def _scaled(self, indices: np.ndarray) -> np.ndarray:
        """Value positions of ``indices``, each knob scaled to [0, 1] (fixed knobs 0)."""
        radices = np.array([len(p.values) for p in self.space.parameters], dtype=np.float64)
        scaled: np.ndarray = self.space.positions(indices) / np.maximum(radices - 1, 1)
        return scaled

    def _make_plan(self, n: int) -> list[int]:
        plan = super()._make_plan(n)
        if self.model.fitted and plan:
            ids = np.array(plan, dtype=np.int64)
            self.trust.planned(ids, self.score(ids))
        return plan

    def _candidates(self, n: int, taken: set[int]) -> np.ndarray:
        """The pooled sources' candidates, drawn once per fit of the model for a plan of
        ``plan_length`` (or ``n``, if longer): the model's scores do not change until its next
        fit, so a plan between refits (cheap measurements) takes the last draw less what has
        been taken since, while at least ``4 * n`` distinct candidates of it are left."""
        if not self.pool_once_per_fit:
            return self._draw_candidates(n, taken)
        if self._pooled is not None:
            left = self._pooled[~np.isin(self._pooled, np.fromiter(taken, np.int64))]
            if len(np.unique(left)) >= 4 * n:
                return left
        self._pooled = self._draw_candidates(max(n, self.plan_length()), taken)
        return self._pooled

    def _draw_candidates(self, n: int, taken: set[int]) -> np.ndarray:
        parts = [
            self.top_predicted(4 * n, taken),
            self.local(2 * n, taken),
            self.annealed(2 * n, taken),
        ]
        starts = np.concatenate([self.best_measured(8), self.space.sample(8, self.rng)])
        found, _ = self.agent.propose(self.score, starts, n=2 * n + len(taken))
        parts.append(found[~np.isin(found, np.fromiter(taken, np.int64))][: 2 * n])
        return np.concatenate(parts)


class _Explorer(AutoSearch):
    """The explorer of an ``auto`` job with a prior: ``auto`` on its own measurements only
    (no prior, so no explorer of its own), skipping what the main search has handed out."""

    def __init__(self, main: AutoSearch, seed: int | None) -> None:
        ctx = main.context
        super().__init__(
            main.space, seed=seed, context=SearchContext(ctx.workload, ctx.device, ctx.spec, ())
        )
        self._main = main
        #: the main search's table of space features serves when its columns are the same
        #: (no device columns there either), so the space is featurised once, not twice
        self._same_features = self.model.extractor.names == main.model.extractor.names

    def space_features(self) -> np.ndarray:
        return self._main.space_features() if self._same_features else super().space_features()

    def hand_out(self, indices: set[int]) -> None:
        """Never propose ``indices`` (handed out by the main search; their results are not
        told here, so that the explorer's incumbents stay its own)."""
        self._handed |= indices
