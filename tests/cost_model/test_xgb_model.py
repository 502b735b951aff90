"""The XGBoost cost model: learns a known cost function, round-trips through a file, refits
by its stated policy, treats failures as the worst label."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktune.cost_model.devices import default_catalog
from ktune.cost_model.features import FeatureExtractor
from ktune.cost_model.model import ModelError
from ktune.cost_model.samples import Sample, group_ids, relative_throughput
from ktune.cost_model.xgb import XGBCostModel
from ktune.search_space import SearchSpace, Workload
from tests.cost_model.synthetic import samples_of, synthetic_time

A4000 = "NVIDIA RTX A4000"


def test_recovers_the_best_config(synthetic_space: SearchSpace) -> None:
    spec = default_catalog().get(A4000)
    assert spec is not None
    times = synthetic_time(synthetic_space, spec)
    best = int(np.argmin(times))
    wl = Workload("synthetic", (4096, 4096))
    model = XGBCostModel(FeatureExtractor(synthetic_space.parameters), seed=1)
    model.fit(samples_of(synthetic_space, A4000))
    score, unc = model.predict_space(synthetic_space, wl, spec)
    assert int(np.argmax(score)) == best
    assert (unc >= 0).all() and unc.max() > 0  # a bootstrap ensemble disagrees somewhere
    # trained on half the space without the optimum, it still ranks it among its top 5
    rng = np.random.default_rng(3)
    train = rng.permutation(np.delete(np.arange(len(synthetic_space)), best))[
        : len(synthetic_space) // 2
    ]
    model.fit(samples_of(synthetic_space, A4000, train))
    score, _ = model.predict_space(synthetic_space, wl, spec)
    assert best in np.argsort(-score)[:5]


def test_save_load_round_trip_gives_identical_predictions(
    synthetic_space: SearchSpace, tmp_path: Path
) -> None:
    spec = default_catalog().get(A4000)
    samples = samples_of(synthetic_space, A4000) + samples_of(
        synthetic_space, "AMD Instinct MI250X"
    )
    wl = Workload("synthetic", (4096, 4096))
    model = XGBCostModel(
        FeatureExtractor(synthetic_space.parameters),
        target=(wl.key, A4000),
        target_spec=spec,
        seed=2,
    )
    model.fit(samples)
    path = tmp_path / "model.ktm"
    model.save(path)
    loaded = XGBCostModel.load(path)
    a = model.predict_space(synthetic_space, wl, spec)
    b = loaded.predict_space(synthetic_space, wl, spec)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert [s.to_dict() for s in loaded.samples] == [s.to_dict() for s in model.samples]
    assert loaded.target == model.target and loaded.target_spec == spec
    assert loaded.extractor.names == model.extractor.names
    # the training data came back too: a refit of the loaded model gives the same model
    loaded.fit(loaded.samples)
    assert np.array_equal(loaded.predict_space(synthetic_space, wl, spec)[0], a[0])


def test_load_rejects_files_that_are_not_models(tmp_path: Path) -> None:
    bad = tmp_path / "x.ktm"
    bad.write_text("not a zip")
    with pytest.raises(ModelError, match="cannot load"):
        XGBCostModel.load(bad)
    with pytest.raises(ModelError, match="cannot load"):
        XGBCostModel.load(tmp_path / "missing.ktm")


def test_unfitted_or_misshapen_use_is_an_error(synthetic_space: SearchSpace) -> None:
    model = XGBCostModel(FeatureExtractor(synthetic_space.parameters))
    with pytest.raises(ModelError, match="not fitted"):
        model.predict(np.zeros((1, model.extractor.n_features)))
    with pytest.raises(ModelError, match="no successful"):
        model.fit([])
    model.fit(samples_of(synthetic_space, A4000))
    with pytest.raises(ModelError, match="expected"):
        model.predict(np.zeros((1, 3)))
    with pytest.raises(ModelError, match="objective"):
        XGBCostModel(model.extractor, objective="magic")


def test_refit_policy(synthetic_space: SearchSpace) -> None:
    wl = Workload("synthetic", (4096, 4096))
    model = XGBCostModel(
        FeatureExtractor(synthetic_space.parameters), target=(wl.key, A4000), n_members=1
    )
    big = samples_of(synthetic_space, "AMD Instinct MI250X")
    assert len(big) > 100
    model.fit(big[:-5])
    # a few more samples of a large, known group: stored, no refit
    assert model.update(big[-5:]) is False
    assert len(model.samples) == len(big)
    # the target's first measurements: a new, sparse group, so every update refits
    target = samples_of(synthetic_space, A4000, np.arange(3))
    assert model.update(target[:2]) is True
    assert model.update(target[2:]) is True
    # growth by 10% of a known group refits
    extra = samples_of(synthetic_space, "NVIDIA L4")
    assert model.update(extra) is True
    assert model.update([]) is False


def test_failed_trials_are_the_worst_label_and_invalid_ones_are_left_out(
    synthetic_space: SearchSpace,
) -> None:
    wl = Workload("synthetic", (4096, 4096))
    configs = synthetic_space.configs([0, 1, 2, 3])
    samples = [
        Sample(configs[0], wl, "gpu", None, "ok", 2.0),
        Sample(configs[1], wl, "gpu", None, "ok", 1.0),
        Sample(configs[2], wl, "gpu", None, "runtime_error", None),
        Sample(configs[3], wl, "gpu", None, "invalid", None),
        Sample(configs[0], wl, "other", None, "ok", 10.0),
    ]
    ids, groups = group_ids(samples)
    assert groups == [(wl.key, "gpu"), (wl.key, "other")]
    assert relative_throughput(samples, ids).tolist() == [0.5, 1.0, 0.0, 0.0, 1.0]
    model = XGBCostModel(FeatureExtractor(synthetic_space.parameters), n_members=1)
    model.fit(samples)
    assert [s.status for s in model.samples] == ["ok", "ok", "runtime_error", "ok"]


def test_ranking_objective_also_recovers_the_best_region(synthetic_space: SearchSpace) -> None:
    spec = default_catalog().get(A4000)
    assert spec is not None
    model = XGBCostModel(
        FeatureExtractor(synthetic_space.parameters), objective="rank", n_members=2
    )
    model.fit(samples_of(synthetic_space, A4000) + samples_of(synthetic_space, "NVIDIA L4"))
    score, _ = model.predict_space(synthetic_space, Workload("synthetic", (4096, 4096)), spec)
    times = synthetic_time(synthetic_space, spec)
    assert times[np.argsort(-score)[:5]].min() == times.min()
