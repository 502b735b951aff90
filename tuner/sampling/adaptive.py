"""Adaptive sampling (Chameleon, Ahn et al., ICLR 2020): a diverse, promising batch.

From the pooled proposals: drop what was measured, cluster the rest in the space's value-
position encoding (k chosen by the knee of the inertia curve, at least the batch size), take
from each cluster its member with the best acquisition (predicted score plus an uncertainty
bonus), keep the best clusters, and fill slots left empty (too few distinct proposals) with
configurations synthesised from the most promising proposals' knob values (the most frequent
value of each knob), walked to the nearest unmeasured valid configuration.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.sampling.kmeans import kmeans

__all__ = ["AdaptiveSampler"]


@dataclass
class AdaptiveSampler:
    space: SearchSpace
    rng: np.random.Generator
    #: weight of the uncertainty bonus in the acquisition
    beta: float = 1.0

    def select(
        self,
        candidates: np.ndarray,
        score: np.ndarray,
        uncertainty: np.ndarray,
        n: int,
        measured: Collection[int],
    ) -> list[int]:
        """Pick up to ``n`` distinct unmeasured indices; higher ``score`` is better."""
        candidates = np.asarray(candidates, dtype=np.int64)
        keep = np.array([int(c) not in measured for c in candidates], dtype=bool)
        candidates, score, uncertainty = (
            candidates[keep],
            np.asarray(score)[keep],
            np.asarray(uncertainty)[keep],
        )
        candidates, first = np.unique(candidates, return_index=True)
        score, uncertainty = score[first], uncertainty[first]
        if n <= 0 or len(self.space) == 0:
            return []
        acquisition = score + self.beta * uncertainty
        picks: list[int] = []
        if len(candidates):
            points = self._encode(candidates)
            labels = self._cluster(points, n)
            best_per_cluster = []
            for label in np.unique(labels):
                members = np.flatnonzero(labels == label)
                # best acquisition; among equals (no model yet: all zero) a random member, so an
                # untrained batch is not biased towards low indices (the first values of the
                # first parameters: the lowest index of a cluster is its smallest block size)
                shuffle = self.rng.permutation(len(members))
                top = members[np.lexsort((shuffle, -acquisition[members]))[0]]
                best_per_cluster.append((acquisition[top], int(candidates[top])))
            best_per_cluster.sort(key=lambda t: -t[0])
            picks = [index for _, index in best_per_cluster[:n]]
        if len(picks) < n:
            order = np.argsort(-acquisition)
            picks += self._synthesise(
                candidates[order[: max(8, 2 * n)]], n - len(picks), set(measured) | set(picks)
            )
        return picks

    def _encode(self, indices: np.ndarray) -> np.ndarray:
        positions = self.space.positions(indices).astype(float)
        sizes = np.array([max(1, len(p.values) - 1) for p in self.space.parameters], dtype=float)
        scaled: np.ndarray = positions / sizes
        return scaled

    def _cluster(self, points: np.ndarray, n: int) -> np.ndarray:
        """k-means with k at the knee of the inertia curve over k = n, 2n, 4n (capped)."""
        distinct = len(np.unique(points, axis=0))
        if distinct <= n:
            labels, _ = kmeans(points, distinct, self.rng)
            return labels
        ks = sorted({min(distinct, n * m) for m in (1, 2, 4)})
        runs = [(k, *kmeans(points, k, self.rng)) for k in ks]
        chosen = runs[0]
        for prev, cur in itertools.pairwise(runs):
            # go to the larger k only while it still cuts the inertia by at least a third
            if prev[2] > 0 and cur[2] <= prev[2] * (2 / 3):
                chosen = cur
            else:
                break
        return chosen[1]

    def _synthesise(self, promising: np.ndarray, n: int, taken: set[int]) -> list[int]:
        """``n`` new configs built from the most frequent knob values of ``promising``."""
        out: list[int] = []
        if len(promising):
            positions = self.space.positions(promising)
            mode = [
                Counter(positions[:, j].tolist()).most_common(1)[0][0]
                for j in range(positions.shape[1])
            ]
            config = {p.name: p.values[mode[j]] for j, p in enumerate(self.space.parameters)}
            start = self.space.index(config)
            if start is None:
                start = int(promising[0])
            out = self._walk(start, n, taken)
        if len(out) < n:
            exclude = np.fromiter(taken | set(out), dtype=np.int64)
            out += [int(i) for i in self.space.sample(n - len(out), self.rng, exclude=exclude)]
        return out

    def _walk(self, start: int, n: int, taken: set[int], max_visits: int = 256) -> list[int]:
        """Breadth-first over one-knob neighbours from ``start``: the first unmeasured ones."""
        out: list[int] = []
        frontier, seen = [start], {start}
        while frontier and len(out) < n and len(seen) < max_visits:
            nxt: list[int] = []
            for index in frontier:
                if index not in taken and index not in out:
                    out.append(index)
                    if len(out) == n:
                        return out
                for nb in self.space.neighbours(index, "hamming").tolist():
                    if nb not in seen:
                        seen.add(nb)
                        nxt.append(nb)
            self.rng.shuffle(nxt)
            frontier = nxt
        return out
