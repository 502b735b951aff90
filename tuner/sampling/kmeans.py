"""Seeded k-means (k-means++ initialisation, Lloyd iterations) on small point sets."""

from __future__ import annotations

import numpy as np

__all__ = ["kmeans"]


def kmeans(
    points: np.ndarray, k: int, rng: np.random.Generator, iterations: int = 20
) -> tuple[np.ndarray, float]:
    """Cluster ``points`` (n, d) into ``k`` groups; return labels (n,) and the inertia.

    Deterministic for a given ``rng`` state. ``k`` is capped at the number of distinct points.
    """
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    distinct = np.unique(points, axis=0)
    k = max(1, min(k, len(distinct)))
    centres = np.empty((k, points.shape[1]))
    centres[0] = distinct[rng.integers(len(distinct))]
    d2 = ((distinct - centres[0]) ** 2).sum(axis=1)
    for j in range(1, k):
        total = d2.sum()
        pick = rng.choice(len(distinct), p=d2 / total) if total > 0 else rng.integers(len(distinct))
        centres[j] = distinct[pick]
        d2 = np.minimum(d2, ((distinct - centres[j]) ** 2).sum(axis=1))
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iterations):
        dist = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        new = dist.argmin(axis=1)
        if _ > 0 and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = points[labels == j]
            if len(members):
                centres[j] = members.mean(axis=0)
    inertia = float(((points - centres[labels]) ** 2).sum())
    return labels, inertia
