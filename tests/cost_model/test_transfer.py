"""Transfer from the tuning log to a GPU without trials, then with some (real log, both
backends): the bundled convolution recording (RTX A4000) plus a synthetic second GPU."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest

from ktune.cost_model.devices import default_catalog
from ktune.cost_model.samples import group_ids
from ktune.cost_model.similarity import source_similarity
from ktune.db import TuningLog
from ktune.search_space.formats import RecordedSpace, load_cache, write_cache
from ktune.tuner.importing import import_recording
from ktune.tuner.strategies import Observation
from ktune.tuner.training import samples_from_log, transfer_model

A6000 = "NVIDIA RTX A6000"
RTX3090 = "NVIDIA GeForce RTX 3090"  # nearest to the A6000 by spec, never measured here


def _shmem_loving(rec: RecordedSpace, tmp_path: Path) -> RecordedSpace:
    """A synthetic A6000: the A4000's times, with shared-memory configs made 3x faster."""
    records = []
    for r in rec.records.values():
        if r.time_ms is not None:
            factor = (1 / 3 if r.config["use_shmem"] else 1.0) * 0.6
            r = dataclasses.replace(
                r, time_ms=r.time_ms * factor, times_ms=tuple(t * factor for t in r.times_ms)
            )
        records.append(r)
    path = tmp_path / "synthetic_a6000.json"
    write_cache(path, device_name=A6000, kernel_name=rec.kernel_name, problem_size=rec.problem_size,
                parameters=rec.parameters, records=records)  # fmt: skip
    return load_cache(path)


def _truth(rec: RecordedSpace) -> np.ndarray:
    out = np.full(len(rec.space), np.inf)
    for i, c in enumerate(rec.space.configs(np.arange(len(rec.space)))):
        r = rec.lookup(c)
        if r is not None and r.status == "ok" and r.time_ms is not None:
            out[i] = r.time_ms
    return out


@pytest.fixture
def log_with_two_gpus(
    db_url: str, convolution: RecordedSpace, pnpoly: RecordedSpace, tmp_path: Path
):
    synthetic = _shmem_loving(convolution, tmp_path)
    tlog = TuningLog.open(db_url)
    for rec in (convolution, synthetic, pnpoly):
        import_recording(tlog, rec)
    yield tlog, synthetic
    tlog.close()


@pytest.mark.both_databases
def test_training_data_holds_every_device_of_matching_spaces_only(
    log_with_two_gpus, convolution: RecordedSpace
) -> None:
    tlog, _ = log_with_two_gpus
    samples = samples_from_log(tlog, convolution.parameters)
    assert {s.device for s in samples} == {"NVIDIA RTX A4000", A6000}
    assert {s.workload.operator for s in samples} == {"convolution_kernel"}
    assert all(s.spec is not None for s in samples)
    assert len(samples) == 2 * sum(r.status != "invalid" for r in convolution.records.values())
    assert (
        samples_from_log(tlog, convolution.parameters, exclude_devices=[A6000])[0].device
        == "NVIDIA RTX A4000"
    )


def test_zero_shot_then_target_trials(log_with_two_gpus, convolution: RecordedSpace) -> None:
    tlog, synthetic = log_with_two_gpus
    truth = _truth(synthetic)  # the unseen GPU behaves like its nearest neighbour by spec
    model = transfer_model(
        tlog, convolution.space, convolution.workload(), RTX3090, n_members=1, n_rounds=30
    )
    assert model.n_target == 0 and model.spec is not None and model.spec.name == RTX3090
    # the A6000 is the nearest source by spec and weighs more than the A4000
    samples = model.model.samples
    ids, groups = group_ids(samples)
    sim = source_similarity(samples, ids, groups, (convolution.workload().key, RTX3090), model.spec)
    assert sim[groups.index((convolution.workload().key, A6000))] == 1.0
    assert sim[groups.index((convolution.workload().key, "NVIDIA RTX A4000"))] < 0.5
    order = model.rank()
    assert sorted(order.tolist()) == list(range(len(convolution.space)))
    assert truth.min() / truth[order[:10]].min() >= 1 / 1.05  # top-10 within 5% of the optimum
    # target trials arrive: they join the training data and the model refits
    rng = np.random.default_rng(0)
    picked = convolution.space.sample(30, rng)
    obs = [
        Observation(int(i), "ok", float(truth[i]))
        if np.isfinite(truth[i])
        else Observation(int(i), "runtime_error", None)
        for i in picked
    ]
    assert model.update(obs[:10]) is True and model.n_target == 10
    assert model.update(obs[10:]) is True and model.n_target == 30
    order = model.rank()
    assert truth.min() / min(truth[order[:10]].min(), truth[picked].min()) >= 1 / 1.05
    sub = model.rank(picked[:5])
    assert sorted(sub.tolist()) == sorted(picked[:5].tolist())


def test_unknown_device_ranks_with_a_warning(
    log_with_two_gpus, convolution: RecordedSpace, caplog: pytest.LogCaptureFixture
) -> None:
    tlog, _ = log_with_two_gpus
    with caplog.at_level(logging.WARNING, logger="ktune"):
        model = transfer_model(
            tlog, convolution.space, convolution.workload(), "Mystery GPU", n_members=1, n_rounds=10
        )
    assert "Mystery GPU" in caplog.text and "spec-less" in caplog.text
    assert model.spec is None
    score, unc = model.predict()
    assert np.isfinite(score).all() and np.isfinite(unc).all()


def test_a_log_without_matching_trials_is_a_clear_error(
    db_url: str, convolution: RecordedSpace
) -> None:
    from ktune.cost_model.model import ModelError

    with TuningLog.open(db_url) as tlog, pytest.raises(ModelError, match="no successful trial"):
        transfer_model(tlog, convolution.space, convolution.workload(), A6000)


def test_catalog_knows_the_transfer_devices() -> None:
    assert default_catalog().get(RTX3090) is not None and default_catalog().get(A6000) is not None
