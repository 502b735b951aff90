"""The learned cost model: device specs and their embedding, features, XGBoost, transfer.

- :mod:`ktune.cost_model.devices` - :class:`DeviceSpec`, the shipped catalog, vendor name matching,
  specs from CUDA device properties.
- :mod:`ktune.cost_model.embedding` - the fixed-length, explainable device embedding.
- :mod:`ktune.cost_model.features` - :class:`FeatureExtractor` over (config, workload, device).
- :mod:`ktune.cost_model.model` / :mod:`ktune.cost_model.xgb` - the :class:`CostModel`
  interface and the XGBoost ensemble (``xgboost`` is imported only when a model trains,
  predicts or loads).
- :mod:`ktune.cost_model.transfer` - :class:`TransferModel`: rank a device's space from samples of
  other devices and workloads (``ktune.tuner.training`` reads them from the log), zero-shot or
  with the target's own trials.
"""

from __future__ import annotations

from ktune.cost_model.devices import (
    Catalog,
    CatalogError,
    DeviceSpec,
    default_catalog,
    normalise_name,
    resolve,
    spec_from_cuda_properties,
)
from ktune.cost_model.embedding import EMBEDDING_NAMES, embed, explain
from ktune.cost_model.features import DerivedFeatures, FeatureError, FeatureExtractor
from ktune.cost_model.model import CostModel, ModelError
from ktune.cost_model.prior import PriorLimit, limit_samples
from ktune.cost_model.samples import Sample
from ktune.cost_model.transfer import TransferModel
from ktune.cost_model.xgb import XGBCostModel

__all__ = [
    "EMBEDDING_NAMES",
    "Catalog",
    "CatalogError",
    "CostModel",
    "DerivedFeatures",
    "DeviceSpec",
    "FeatureError",
    "FeatureExtractor",
    "ModelError",
    "PriorLimit",
    "Sample",
    "TransferModel",
    "XGBCostModel",
    "default_catalog",
    "embed",
    "explain",
    "limit_samples",
    "normalise_name",
    "resolve",
    "spec_from_cuda_properties",
]
