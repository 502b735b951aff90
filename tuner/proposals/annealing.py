"""Simulated annealing on a cost model (AutoTVM's model-based SA), vectorised over chains.

Each chain moves one knob at a time to another of its values; a move to a configuration the
space does not hold is rejected. A move is accepted with probability
``min(1, exp((s_new - s_old) / T))`` where ``s`` is the predicted score (in units of its
standard deviation over the chains' start points) and ``T`` falls linearly to zero. Every
visited configuration is a candidate; the best ``n`` are returned.
"""

from __future__ import annotations

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals import Scorer

__all__ = ["anneal"]


def anneal(
    space: SearchSpace,
    scorer: Scorer,
    starts: np.ndarray,
    rng: np.random.Generator,
    *,
    steps: int = 60,
    temperature: float = 1.0,
    n: int = 64,
) -> tuple[np.ndarray, np.ndarray]:
    """Run one chain from each of ``starts``; return up to ``n`` visited indices and scores."""
    current = np.asarray(starts, dtype=np.int64)
    if len(current) == 0 or len(space) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    radices = np.array([len(p.values) for p in space.parameters])
    movable = np.flatnonzero(radices > 1)
    if len(movable) == 0:
        return current[:n], scorer(current[:n])
    pos = space.positions(current)
    score = scorer(current)
    scale = float(np.std(score)) or 1.0
    visited: dict[int, float] = dict(zip(current.tolist(), score.tolist()))
    chains = np.arange(len(current))
    for step in range(steps):
        t = temperature * (1.0 - step / steps) + 1e-9
        knob = movable[rng.integers(len(movable), size=len(current))]
        # another value of that knob, uniformly
        shift = rng.integers(1, radices[knob])
        proposal = pos.copy()
        proposal[chains, knob] = (pos[chains, knob] + shift) % radices[knob]
        index = space.indices_of_positions(proposal)
        ok = index >= 0
        if not ok.any():
            continue
        new_score = np.full(len(current), -np.inf)
        new_score[ok] = scorer(index[ok])
        for i, s in zip(index[ok].tolist(), new_score[ok].tolist()):
            visited[i] = s
        accept = ok & (
            rng.random(len(current)) < np.exp(np.minimum(0.0, (new_score - score) / (scale * t)))
        )
        pos[accept] = proposal[accept]
        current = np.where(accept, index, current)
        score = np.where(accept, new_score, score)
    items = sorted(visited.items(), key=lambda kv: -kv[1])[:n]
    return np.array([i for i, _ in items], dtype=np.int64), np.array([s for _, s in items])
