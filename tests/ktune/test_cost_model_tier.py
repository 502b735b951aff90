"""The lookup's last tier: a cost model trained on the log ranks an untuned workload's space."""

from __future__ import annotations

import math

import ktune
from ktune.cost_model.devices import default_catalog
from ktune.db import TrialIn, TuningLog
from ktune.search_space import operators
from ktune.search_space.operators.base import DeviceLimits

SOURCE = "NVIDIA A100-PCIE-40GB"
TARGET = "NVIDIA RTX A6000"


def _time(config: dict) -> float:
    """A smooth landscape: best at 16x16 threads, 4x4 tiles, tile_size_k 16."""
    return 1.0 + sum(
        (math.log2(config[k]) - math.log2(v)) ** 2
        for k, v in (
            ("block_size_x", 16),
            ("block_size_y", 16),
            ("tile_size_x", 4),
            ("tile_size_y", 4),
            ("tile_size_k", 16),
        )
    )


def _log_with_source_trials(db_url: str) -> None:
    op = operators.get("matmul")
    limits = DeviceLimits.from_spec(default_catalog().get(SOURCE))
    with TuningLog.open(db_url) as tlog:
        device = tlog.get_or_create_device(SOURCE)
        for shape in ((1024, 1024, 1024), (512, 2048, 1024)):
            wl = op.workload(shape, "float32")
            space = op.space(wl, limits)
            workload = tlog.get_or_create_workload(
                wl.key, wl.operator, wl.shape, wl.dtype, wl.layout, space=space.to_dict()
            )
            configs = space.configs(range(0, len(space), max(1, len(space) // 400)))
            rows = [
                TrialIn(config=c, config_key=space.key(c), status="ok", time_ms=_time(c))
                for c in configs
            ]
            tlog.add_trials(None, workload.id, device.id, "replay", rows)


def test_an_untuned_workload_on_an_untuned_device_gets_the_models_choice(db_url: str) -> None:
    _log_with_source_trials(db_url)
    answer = ktune.lookup("matmul", (2048, 2048, 2048), dtype="float32", device=TARGET, db=db_url)
    assert answer is not None and answer.tier == "cost_model"
    assert answer.time_ms is None and answer.device == TARGET
    # the model learnt the landscape from the other device's shapes: its choice is near the best
    assert _time(answer.config) <= 2.0


def test_no_model_answer_for_a_device_without_a_spec(db_url: str) -> None:
    _log_with_source_trials(db_url)
    with TuningLog.open(db_url) as tlog:
        tlog.get_or_create_device("Mystery GPU 9000")  # known to the log, but no spec anywhere
    assert (
        ktune.lookup(
            "matmul", (2048, 2048, 2048), dtype="float32", device="Mystery GPU 9000", db=db_url
        )
        is None
    )


def test_the_model_tier_is_installed_by_default_and_can_be_replaced() -> None:
    from ktune.tuner.lookup.cost_model_tier import cost_model_choice

    previous = ktune.register_model_choice(None)
    assert previous is cost_model_choice
    assert ktune.register_model_choice(previous) is None
