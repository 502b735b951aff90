"""Transfer to a GPU: rank a space for a (workload, device) from what the log knows.

With no trial of the target device, the model trained on the other devices ranks the target's
space through the device-spec features (zero-shot). As target measurements arrive
(:meth:`TransferModel.update`), they join the training data as the *target group*, whose
weight grows with their number (see :mod:`ktune.cost_model.xgb`); the model refits on every update
while the target is sparse.

This is the API search strategies use (``ktune.tuner.training.transfer_model`` fits one on
the tuning log's trials)::

    model = TransferModel.fit(samples, space, workload, "NVIDIA RTX A4000", spec)
    order = model.rank()                  # dense indices, best predicted first
    model.update(observations)            # objects with .index, .status, .time_ms
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ktune.cost_model.devices import DeviceSpec
from ktune.cost_model.features import DerivedFeatures, FeatureExtractor
from ktune.cost_model.model import CostModel, ModelError
from ktune.cost_model.prior import PriorLimit
from ktune.cost_model.samples import Sample
from ktune.cost_model.xgb import XGBCostModel
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["MIN_DEVICES_FOR_COLUMNS", "ObservationLike", "TransferModel"]

#: source devices with known specs needed before device columns enter the trees
MIN_DEVICES_FOR_COLUMNS = 5
#: how much of the log a model trains on by default (what a tuning job's strategy takes)
DEFAULT_LIMIT = PriorLimit()


class ObservationLike(Protocol):
    """A measurement of the space being tuned (``ktune.tuner.strategies.Observation`` fits)."""

    @property
    def index(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def time_ms(self) -> float | None: ...


class TransferModel:
    """A cost model bound to one space, workload and device: ranks that device's configs."""

    def __init__(
        self,
        model: CostModel,
        space: SearchSpace,
        workload: Workload,
        device: str,
        spec: DeviceSpec | None,
    ) -> None:
        self.model = model
        self.space = space
        self.workload = workload
        self.device = device
        self.spec = spec
        self._features: np.ndarray | None = None  # of the whole space, computed once

    @classmethod
    def fit(
        cls,
        samples: Sequence[Sample],
        space: SearchSpace,
        workload: Workload,
        device: str,
        spec: DeviceSpec | None,
        *,
        device_features: bool | None = None,
        operator: DerivedFeatures | None = None,
        **model_options: object,
    ) -> TransferModel:
        """Fit on ``samples`` (of spaces with this space's parameters; those of ``device``
        and ``workload`` form the target group) a model that ranks ``space`` for ``device``,
        whose spec is ``spec`` (None: the spec-less embedding). A :class:`ModelError` when no
        sample ran successfully.

        ``device_features``: whether the device columns (embedding, occupancy, waves) enter
        the trees; ``None`` (default) turns them on once the training data holds at least
        :data:`MIN_DEVICES_FOR_COLUMNS` devices with known specs. With fewer, a tree cannot
        tell an effect of a spec from the identity of a device: a split on a device column
        sends an unseen GPU to whichever training GPU shares its side of the threshold. The
        spec still acts, through the similarity weighting of the source devices
        (:mod:`ktune.cost_model.similarity`), whenever ``source_weighting`` is on."""
        samples = [_with_spec(s, device, spec) for s in samples]
        if not any(s.ok for s in samples):
            raise ModelError(
                f"the log has no successful trial of a space with parameters {list(space.names)}"
            )
        if device_features is None:
            known = {s.device for s in samples if s.spec is not None and s.device != device}
            device_features = len(known) >= MIN_DEVICES_FOR_COLUMNS
        extractor = FeatureExtractor(
            space.parameters, device_features=device_features, operator=operator
        )
        model = XGBCostModel(
            extractor,
            target=(workload.key, device),
            target_spec=spec,
            **model_options,  # type: ignore[arg-type]
        )
        model.fit(samples)
        return cls(model, space, workload, device, spec)

    @property
    def n_target(self) -> int:
        """How many samples of the target (workload, device) the model holds."""
        key = (self.workload.key, self.device)
        return sum(1 for s in self.model.samples if s.group == key)

    def predict(
        self, indices: Sequence[int] | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(score, uncertainty)`` of the configs at ``indices`` (all when ``None``)."""
        if self._features is None:
            self._features = self.model.extractor.for_space(
                self.space, None, self.workload, self.spec
            )
        rows = (
            self._features
            if indices is None
            else self._features[np.asarray(indices, dtype=np.int64)]
        )
        return self.model.predict(rows)

    def rank(self, indices: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Dense indices (of ``indices``, or the whole space) ordered best predicted first;
        ties keep index order, so the ranking is deterministic."""
        idx = np.arange(len(self.space)) if indices is None else np.asarray(indices, dtype=np.int64)
        score, _ = self.predict(idx)
        return idx[np.argsort(-score, kind="stable")]

    def update(self, observations: Sequence[ObservationLike]) -> bool:
        """Add target measurements; returns whether the model refit."""
        if not observations:
            return False
        configs = self.space.configs([int(o.index) for o in observations])
        samples = [
            Sample(c, self.workload, self.device, self.spec, o.status, o.time_ms)
            for c, o in zip(configs, observations)
        ]
        return self.model.update(samples)


def _with_spec(s: Sample, name: str, spec: DeviceSpec | None) -> Sample:
    """The target's samples carry the spec the caller gave (it may be richer than the log's)."""
    if s.device != name or s.spec is spec:
        return s
    return Sample(s.config, s.workload, s.device, spec, s.status, s.time_ms)
