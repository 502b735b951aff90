"""XGBoost cost model: a small bootstrap ensemble of gradient-boosted trees.

Objective. Each sample's label is its group's *relative throughput* (best time of its
(workload, device) group / its time, 0 for a failed run; see
:func:`ktune.cost_model.samples.relative_throughput`), so groups with very different absolute times
train together. ``objective="throughput"`` (default) regresses that label with squared error,
which puts the model's effort where the tuner needs it: telling the fast configs apart.
``objective="rank"`` instead trains XGBoost's pairwise ranking loss within each group on the
same labels.

Failed trials (compile/runtime error, timeout, wrong result) are kept as label 0, the worst:
they teach the model which configs a device cannot run (too many threads, registers or
shared memory). ``invalid`` trials (outside the space's constraints) say nothing about speed
and are left out.

Weights. A group's samples together weigh ``n / (n + half_weight_at)``: a group earns trust as
it grows and saturates, so a big log of one GPU does not drown another GPU's. When a *target*
(the workload and device being tuned) is set, each source group is further multiplied by its
similarity to the target (:mod:`ktune.cost_model.similarity`: spec embedding distance at first,
agreement with the target's own measurements as they accumulate), and the target group's
share of the total weight is ``n_t / (n_t + target_half_weight_at)`` (10 trials: 1/6, 30
trials: 3/8, 150 trials: 3/4). That is how, in transfer, target trials weigh more as they
arrive; no column marks the target's rows, only their weight sets them apart (what was
compared: docs/benchmarks.md, "cost_model/xgb.py").

Uncertainty. ``n_members`` boosters, each fitted with Poisson(1) bootstrap weights (a
resampling of the rows without copying them); the score is their mean, the uncertainty their
standard deviation.

Refit policy (:meth:`XGBCostModel.update`): refit when the new samples bring a group the
model has not seen, add to a group that had fewer than ``sparse_group`` samples at the last fit
(in a sparse group every measurement is news - this is the target early on), or grow the data
by ``refit_growth`` (10%) since the last fit. Otherwise the samples are only stored.

Threads. ``nthread=1`` by default: ktune shares its machine with measurement workers and
other jobs, and XGBoost's OpenMP threads spin-wait for busy cores, so more threads than free
cores make a fit slower, not faster. Pass ``nthread`` for a dedicated machine.

``xgboost`` is imported inside the functions that need it.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ktune.cost_model.devices import CatalogError, DeviceSpec
from ktune.cost_model.features import DerivedFeatures, FeatureExtractor
from ktune.cost_model.model import CostModel, ModelError
from ktune.cost_model.samples import Sample, group_ids, relative_throughput
from ktune.cost_model.similarity import source_similarity

__all__ = ["XGBCostModel"]

_FORMAT = "ktune-cost-model"
_VERSION = 1
OBJECTIVES = ("throughput", "rank")


class XGBCostModel(CostModel):
    """See the module docstring. ``target`` is the (workload key, device name) being tuned."""

    def __init__(
        self,
        extractor: FeatureExtractor,
        *,
        objective: str = "throughput",
        target: tuple[str, str] | None = None,
        target_spec: DeviceSpec | None = None,
        source_weighting: bool = True,
        target_half_weight_at: int = 50,
        n_members: int = 4,
        n_rounds: int = 60,
        max_depth: int = 6,
        learning_rate: float = 0.2,
        half_weight_at: int = 30,
        refit_growth: float = 0.10,
        sparse_group: int = 100,
        seed: int = 0,
        nthread: int = 1,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ModelError(f"unknown objective {objective!r} (one of {', '.join(OBJECTIVES)})")
        if n_members < 1 or n_rounds < 1 or max_depth < 1:
            raise ModelError("n_members, n_rounds and max_depth must be >= 1")
        self.extractor = extractor
        self.objective = objective
        self.target: tuple[str, str] | None = (target[0], target[1]) if target is not None else None
        self.target_spec = target_spec
        self.source_weighting = source_weighting
        self.target_half_weight_at = target_half_weight_at
        self.n_members = n_members
        self.n_rounds = n_rounds
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.half_weight_at = half_weight_at
        self.refit_growth = refit_growth
        self.sparse_group = sparse_group
        self.seed = seed
        self.nthread = nthread
        self._samples: list[Sample] = []
        self._features: np.ndarray | None = None  # rows of self._samples, cached
        self._boosters: list[Any] = []
        self._fit_counts: Counter[tuple[str, str]] = Counter()

    # --- CostModel

    @property
    def fitted(self) -> bool:
        return bool(self._boosters)

    @property
    def samples(self) -> list[Sample]:
        return list(self._samples)

    def fit(self, samples: Sequence[Sample]) -> None:
        usable = [s for s in samples if s.usable]
        if not any(s.ok for s in usable):
            raise ModelError("no successful measurement to learn from")
        self._samples = usable
        self._features = self.features(usable)
        self._train()

    def update(self, samples: Sequence[Sample]) -> bool:
        new = [s for s in samples if s.usable]
        if not new:
            return False
        rows = self.features(new)
        self._samples.extend(new)
        self._features = rows if self._features is None else np.vstack([self._features, rows])
        if not self._should_refit(new):
            return False
        if not any(s.ok for s in self._samples):
            return False
        self._train()
        return True

    def predict(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self._boosters:
            raise ModelError("the model is not fitted")
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.extractor.n_features:
            raise ModelError(f"expected (n, {self.extractor.n_features}) features, got {x.shape}")
        import xgboost as xgb

        data = xgb.DMatrix(x, nthread=self.nthread)
        preds = np.stack([b.predict(data) for b in self._boosters]).astype(np.float64)
        return preds.mean(axis=0), preds.std(axis=0)

    # --- policy

    def _should_refit(self, new: Sequence[Sample]) -> bool:
        if not self._boosters:
            return True
        fitted_total = sum(self._fit_counts.values())
        for group in {s.group for s in new}:
            if self._fit_counts.get(group, 0) < self.sparse_group:
                return True  # a new group, or a sparse one: every sample is news
        return len(self._samples) - fitted_total >= self.refit_growth * max(fitted_total, 1)

    def weights(
        self, samples: Sequence[Sample], ids: np.ndarray, groups: list[tuple[str, str]]
    ) -> np.ndarray:
        """Per-sample weights of the policy in the module docstring, scaled to mean 1."""
        sizes = np.bincount(ids, minlength=len(groups)).astype(np.float64)
        totals = sizes / (sizes + self.half_weight_at)
        if self.target is not None and self.source_weighting:
            totals *= source_similarity(samples, ids, groups, self.target, self.target_spec)
        if self.target in groups:
            t = groups.index(self.target)
            sources = totals.sum() - totals[t]
            share = sizes[t] / (sizes[t] + self.target_half_weight_at)
            totals[t] = share / (1.0 - share) * sources if sources > 0 else 1.0
        w = (totals / sizes)[ids]
        weights: np.ndarray = w * (len(w) / w.sum())
        return weights

    # --- training

    def _train(self) -> None:
        import xgboost as xgb

        assert self._features is not None
        ids, groups = group_ids(self._samples)
        labels = relative_throughput(self._samples, ids)
        weights = self.weights(self._samples, ids, groups)
        order = np.argsort(ids, kind="stable")  # ranking needs rows of a group together
        x, y, w, qid = self._features[order], labels[order], weights[order], ids[order]

        params: dict[str, Any] = {
            "tree_method": "hist",
            "max_depth": self.max_depth,
            "eta": self.learning_rate,
            "min_child_weight": 1.0,
            "subsample": 1.0,
            "colsample_bytree": 0.8,
            "max_bin": 64,
            "nthread": self.nthread,
            "verbosity": 0,
        }
        if self.objective == "rank":
            params["objective"] = "rank:pairwise"
        else:
            params["objective"] = "reg:squarederror"
            params["base_score"] = float(np.average(y, weights=w))
        rng = np.random.default_rng(self.seed)
        boosters = []
        for m in range(self.n_members):
            bootstrap = (
                rng.poisson(1.0, size=len(y)).astype(np.float64) if self.n_members > 1 else 1.0
            )
            if self.objective == "rank":
                # ranking takes one weight per group: the group's total, bootstrap-perturbed
                data = xgb.DMatrix(x, label=y, qid=qid, nthread=self.nthread)
                data.set_weight(_group_weights(w, qid) * rng.gamma(4.0, 0.25, size=len(groups)))
            else:
                data = xgb.DMatrix(x, label=y, weight=w * bootstrap, nthread=self.nthread)
            params["seed"] = self.seed * 1000 + m
            boosters.append(xgb.train(params, data, num_boost_round=self.n_rounds))
        self._boosters = boosters
        self._fit_counts = Counter(s.group for s in self._samples)

    # --- persistence

    def save(self, path: str | Path) -> None:
        """One zip file: settings, the extractor, the training data and every booster (XGBoost's
        own UBJSON format). Written to a temporary name and renamed, so never half written."""
        if not self._boosters:
            raise ModelError("the model is not fitted")
        path = Path(path)
        specs: dict[str, dict[str, Any] | None] = {}
        for s in self._samples:
            specs.setdefault(s.device, None if s.spec is None else s.spec.to_dict())
        meta = {
            "format": _FORMAT,
            "version": _VERSION,
            "settings": self._settings(),
            "extractor": self.extractor.to_dict(),
            "fit_counts": [[list(g), n] for g, n in self._fit_counts.items()],
            "n_members": len(self._boosters),
        }
        tmp = path.with_name(f".{path.name}.tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("meta.json", json.dumps(meta))
            zf.writestr("devices.json", json.dumps(specs))
            zf.writestr("samples.json", json.dumps([s.to_dict() for s in self._samples]))
            for i, b in enumerate(self._boosters):
                zf.writestr(f"booster_{i}.ubj", bytes(b.save_raw(raw_format="ubj")))
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path, operator: DerivedFeatures | None = None) -> XGBCostModel:
        """A model saved by :meth:`save`; any problem with the file is a :class:`ModelError`."""
        import xgboost as xgb

        path = Path(path)
        try:
            with zipfile.ZipFile(path) as zf:
                meta = json.loads(zf.read("meta.json"))
                if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
                    raise ModelError(f"{path}: not a ktune cost model (version {_VERSION})")
                raw_specs = json.loads(zf.read("devices.json"))
                samples_raw = json.loads(zf.read("samples.json"))
                boosters = []
                for i in range(int(meta["n_members"])):
                    b = xgb.Booster()
                    b.load_model(bytearray(zf.read(f"booster_{i}.ubj")))
                    boosters.append(b)
        except (
            OSError,
            zipfile.BadZipFile,
            KeyError,
            json.JSONDecodeError,
            xgb.core.XGBoostError,
        ) as exc:
            raise ModelError(
                f"{path}: cannot load the cost model ({type(exc).__name__}: {exc})"
            ) from None
        try:
            specs = {
                d: None if v is None else DeviceSpec.from_dict(v) for d, v in raw_specs.items()
            }
            extractor = FeatureExtractor.from_dict(meta["extractor"], operator=operator)
            settings = dict(meta["settings"])
            target = settings.pop("target")
            target_spec = settings.pop("target_spec")
            model = cls(
                extractor,
                target=None if target is None else tuple(target),
                target_spec=None if target_spec is None else DeviceSpec.from_dict(target_spec),
                **settings,
            )
            model._samples = [Sample.from_dict(s, specs) for s in samples_raw]
        except (CatalogError, KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"{path}: malformed cost model ({exc})") from None
        model._features = model.features(model._samples)
        model._boosters = boosters
        model._fit_counts = Counter({tuple(g): int(n) for g, n in meta["fit_counts"]})
        return model

    def _settings(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "target": None if self.target is None else list(self.target),
            "target_spec": None if self.target_spec is None else self.target_spec.to_dict(),
            "source_weighting": self.source_weighting,
            "target_half_weight_at": self.target_half_weight_at,
            "n_members": self.n_members,
            "n_rounds": self.n_rounds,
            "max_depth": self.max_depth,
            "learning_rate": self.learning_rate,
            "half_weight_at": self.half_weight_at,
            "refit_growth": self.refit_growth,
            "sparse_group": self.sparse_group,
            "seed": self.seed,
            "nthread": self.nthread,
        }


def _group_ptr(qid: np.ndarray) -> np.ndarray:
    """Row offsets where each group starts (qid sorted), and the end."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    bounds: np.ndarray = np.r_[starts, len(qid)].astype(np.uint32)
    return bounds


def _group_weights(w: np.ndarray, qid: np.ndarray) -> np.ndarray:
    ptr = _group_ptr(qid)
    return np.add.reduceat(w, ptr[:-1])
