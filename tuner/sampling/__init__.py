"""Choosing which proposals to measure: clustering and adaptive sampling."""

from __future__ import annotations

from tuner.sampling.adaptive import AdaptiveSampler
from tuner.sampling.kmeans import kmeans

__all__ = ["AdaptiveSampler", "kmeans"]
