"""The cost-model interface.

A cost model learns, from measured samples of many (workload, device) groups, a score per
config: higher means faster on that workload and device. Scores are comparable within one
(workload, device), which is all a search needs to rank candidates. ``predict`` also gives an
uncertainty (a standard deviation of the score), so a strategy can trade exploration against
exploitation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ktune.cost_model.devices import DeviceSpec
from ktune.cost_model.features import FeatureExtractor
from ktune.cost_model.samples import Sample
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["CostModel", "ModelError"]


class ModelError(ValueError):
    """A model cannot be fitted, used or loaded as asked."""


class CostModel(ABC):
    """Base of every cost model: features come from :attr:`extractor`."""

    extractor: FeatureExtractor

    @abstractmethod
    def fit(self, samples: Sequence[Sample]) -> None:
        """Train from scratch on ``samples`` (they become the model's training data)."""

    @abstractmethod
    def update(self, samples: Sequence[Sample]) -> bool:
        """Add ``samples`` to the training data; refit when the model's policy says the data
        grew enough. Returns whether it refit."""

    @abstractmethod
    def predict(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(score, uncertainty)`` per feature row; higher score = predicted faster."""

    @abstractmethod
    def save(self, path: str | Path) -> None:
        """Write the model and its training data to one file."""

    @property
    @abstractmethod
    def fitted(self) -> bool: ...

    @property
    @abstractmethod
    def samples(self) -> list[Sample]:
        """The training data (a copy)."""

    def features(self, samples: Sequence[Sample]) -> np.ndarray:
        """Feature rows of ``samples``, computed per (workload, device) group."""
        out = np.empty((len(samples), self.extractor.n_features))
        groups: dict[tuple[str, str], list[int]] = {}
        for i, s in enumerate(samples):
            groups.setdefault(s.group, []).append(i)
        for rows in groups.values():
            first = samples[rows[0]]
            out[rows] = self.extractor.for_configs(
                [samples[i].config for i in rows], first.workload, first.spec
            )
        return out

    def predict_space(
        self,
        space: SearchSpace,
        workload: Workload,
        device: DeviceSpec | None,
        indices: Sequence[int] | np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores of the configs at ``indices`` of ``space`` (all when ``None``)."""
        return self.predict(self.extractor.for_space(space, indices, workload, device))
