"""Choosing which proposals to measure: clustering and adaptive sampling."""

from __future__ import annotations

from ktune.tuner.sampling.adaptive import AdaptiveSampler
from ktune.tuner.sampling.kmeans import kmeans

__all__ = ["AdaptiveSampler", "kmeans"]
