"""How much a source (workload, device) group is like the target: the weight it trains with.

With a handful of source GPUs, a tree model cannot interpolate between devices: a split on a
device coordinate puts an unseen GPU on one side of it, whichever training GPU happens to
share that side. Weighting the source groups by their similarity to the target makes the
model lean on the GPUs most like it, which is what transfer should do:

- **Before target measurements** (zero-shot), similarity comes from the spec embeddings:
  ``exp(-(d^2 - d_min^2) / (2 d_min^2))`` with ``d`` the embedding distance of a source
  device to the target and ``d_min`` that of the nearest source. The nearest source gets 1;
  the bandwidth is the nearest distance itself, so when every source is far from the target
  (a new architecture) they weigh nearly alike, and when one is close the others fade.
- **As target measurements arrive**, each source is also scored by how well its own times
  rank the configs the target has measured (Spearman correlation on the configs both have
  measured, failures as slowest, clipped at 0 and squared). The two are blended with weight
  ``n / (n + 20)`` on the measured agreement, ``n`` being the number of common configs
  (at least 5), so measurements take over from the specs as they accumulate.

A group of the target device itself, or of an unknown device, or any group when the target's
spec is unknown, has similarity 1 (nothing to go on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ktune.cost_model.devices import DeviceSpec
from ktune.cost_model.embedding import spec_distance
from ktune.cost_model.samples import Sample

__all__ = ["source_similarity"]

_MIN_COMMON = 5
_AGREEMENT_HALF = 20
_MIN_BANDWIDTH = 0.25


def source_similarity(
    samples: Sequence[Sample],
    ids: np.ndarray,
    groups: list[tuple[str, str]],
    target: tuple[str, str],
    target_spec: DeviceSpec | None,
) -> np.ndarray:
    """Similarity in [0, 1] of every group to ``target`` (1 for the target group)."""
    n = len(groups)
    first: dict[int, Sample] = {}
    for s, g in zip(samples, ids):
        first.setdefault(int(g), s)
    spec_sim = np.ones(n)
    if target_spec is not None:
        dist = np.array(
            [
                math.inf if groups[g] == target else spec_distance(first[g].spec, target_spec)
                for g in range(n)
            ]
        )
        known = np.isfinite(dist)
        if known.any():
            d_min = max(float(dist[known].min()), _MIN_BANDWIDTH)
            spec_sim[known] = np.exp(-(dist[known] ** 2 - d_min**2) / (2 * d_min**2))
            spec_sim = np.minimum(spec_sim, 1.0)
    if target not in groups:
        return spec_sim
    t = groups.index(target)
    times = _times_by_config(samples, ids, n)
    out = spec_sim.copy()
    for g in range(n):
        if g == t:
            out[g] = 1.0
            continue
        common, rho = _agreement(times[t], times[g])
        if common >= _MIN_COMMON:
            alpha = common / (common + _AGREEMENT_HALF)
            out[g] = (1 - alpha) * spec_sim[g] + alpha * max(rho, 0.0) ** 2
    return out


def _times_by_config(samples: Sequence[Sample], ids: np.ndarray, n: int) -> list[dict[str, float]]:
    """Per group: config key -> time (inf for a failure), in one pass over the samples."""
    out: list[dict[str, float]] = [{} for _ in range(n)]
    for s, g in zip(samples, ids):
        key = ",".join(f"{k}={s.config[k]}" for k in sorted(s.config))
        out[int(g)][key] = float(s.time_ms) if s.ok else math.inf  # type: ignore[arg-type]
    return out


def _agreement(a: dict[str, float], b: dict[str, float]) -> tuple[int, float]:
    keys = [k for k in a if k in b]
    if len(keys) < _MIN_COMMON:
        return len(keys), 0.0
    x = _ranks(np.array([a[k] for k in keys]))
    y = _ranks(np.array([b[k] for k in keys]))
    if x.std() == 0 or y.std() == 0:
        return len(keys), 0.0
    return len(keys), float(np.corrcoef(x, y)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank); inf sorts last."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=np.float64)
    for v in np.unique(values):
        tie = values == v
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks
