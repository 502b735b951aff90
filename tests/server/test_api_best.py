"""Build-time lookup over HTTP and in Python: tiers, and the same answer from both."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TypedDict

import numpy as np
import pytest
from fastapi.testclient import TestClient

import ktune
from ktune.db import JobSpec, LookupQuery, TrialIn, TuningLog
from ktune.search_space.formats import load_cache
from ktune.search_space.workload import Workload
from ktune.tuner.importing import import_recording
from ktune.tuner.sources import bundled_recordings

A100 = "NVIDIA A100-PCIE-40GB"


def add_best(
    tlog: TuningLog,
    shape: tuple[int, ...],
    time_ms: float,
    device: str = A100,
    dtype: str = "float32",
) -> dict[str, Any]:
    """A tuned matmul of ``shape`` on ``device`` whose config names its shape."""
    wl = Workload("matmul", shape, dtype)
    w = tlog.get_or_create_workload(wl.key, wl.operator, wl.shape, wl.dtype)
    d = tlog.get_or_create_device(device)
    config = {"tile": shape[0] // 32, "shape": "x".join(map(str, shape))}
    tlog.add_trials(
        None,
        w.id,
        d.id,
        "import",
        [TrialIn(config=config, config_key=json.dumps(config), status="ok", time_ms=time_ms)],
    )
    return config


@pytest.fixture
def tuned(tlog: TuningLog) -> dict[tuple[int, ...], dict[str, Any]]:
    return {
        s: add_best(tlog, s, t)
        for s, t in [
            ((1024, 1024, 1024), 0.5),
            ((4096, 4096, 4096), 20.0),
            ((1024, 4096, 1024), 2.0),
        ]
    }


class _Question(TypedDict, total=False):
    """Keyword arguments of a lookup, as both the REST and the Python API take them."""

    operator: str
    shape: str
    dtype: str
    workload: str


def _best(client: TestClient, **params: Any) -> Any:
    return client.get("/v1/best", params=params)


def test_exact_answer(
    idle_client: TestClient, tuned: dict[tuple[int, ...], dict[str, Any]]
) -> None:
    answer = _best(
        idle_client, operator="matmul", shape="4096x4096x4096", dtype="float32", device=A100
    ).json()
    assert answer["tier"] == "exact" and answer["distance"] == 0.0
    assert answer["config"] == tuned[(4096, 4096, 4096)] and answer["time_ms"] == 20.0
    assert answer["job"] is None and answer["trial"] is None  # recorded outside any job
    by_key = _best(idle_client, workload="matmul/4096x4096x4096/float32", device=A100).json()
    assert by_key == answer
    # times are written as everywhere else in the API: ISO 8601, UTC, with a Z
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", answer["updated_at"]), answer[
        "updated_at"
    ]


def test_an_answer_says_while_its_shape_is_still_being_tuned(
    idle_client: TestClient, tlog: TuningLog, tuned: dict[tuple[int, ...], dict[str, Any]]
) -> None:
    """A build during a tuning job gets the best so far, and is told it may still improve."""
    question = {"operator": "matmul", "shape": "4096x4096x4096", "dtype": "float32", "device": A100}
    assert _best(idle_client, **question).json()["tuning"] is False
    w = tlog.get_workload("matmul/4096x4096x4096/float32")
    d = tlog.get_device(A100)
    assert w is not None and d is not None
    job = tlog.create_job(JobSpec(w.id, d.id, "replay", "random", 0, 8, 10, None, None))
    answer = _best(idle_client, **question).json()
    assert answer["tier"] == "exact" and answer["tuning"] is True
    near = _best(
        idle_client, operator="matmul", shape="3000x3000x3000", dtype="float32", device=A100
    ).json()
    assert (
        near["workload"] == "matmul/4096x4096x4096/float32" and near["tuning"] is True
    )  # its source shape is being tuned
    assert (
        _best(
            idle_client, operator="matmul", shape="1024x1024x1024", dtype="float32", device=A100
        ).json()["tuning"]
        is False
    )
    tlog.set_job_state(job.id, "cancelled")
    assert _best(idle_client, **question).json()["tuning"] is False


def test_nearest_tuned_shape_on_the_same_device(
    idle_client: TestClient, tuned: dict[tuple[int, ...], dict[str, Any]]
) -> None:
    near_big = _best(
        idle_client, operator="matmul", shape="3000x3000x3000", dtype="float32", device=A100
    ).json()
    assert (
        near_big["tier"] == "nearest_shape"
        and near_big["workload"] == "matmul/4096x4096x4096/float32"
    )
    assert near_big["distance"] == pytest.approx(3 * np.log2(4096 / 3000))
    assert near_big["query"]["workload"] == "matmul/3000x3000x3000/float32"
    # 2048^3 is 3 doublings from each tuned shape: the tie goes to the smallest workload key.
    tie = _best(
        idle_client, operator="matmul", shape="2048,2048,2048", dtype="float32", device=A100
    ).json()
    assert tie["workload"] == "matmul/1024x1024x1024/float32" and tie["distance"] == 3.0
    # Exact answers only: none for an untuned shape.
    exact_only = _best(
        idle_client,
        operator="matmul",
        shape="3000x3000x3000",
        dtype="float32",
        device=A100,
        fallback="false",
    )
    assert exact_only.status_code == 404 and "exact answers only" in exact_only.json()["detail"]
    # Another dtype is another workload family: nothing near, nothing else: 404.
    other = _best(
        idle_client, operator="matmul", shape="1024x1024x1024", dtype="float16", device=A100
    )
    assert other.status_code == 404


@pytest.fixture
def catalog() -> Iterator[Any]:
    devices = pytest.importorskip("ktune.cost_model.devices")
    embedding = pytest.importorskip("ktune.cost_model.embedding")
    by_name = getattr(devices, "lookup", None) or devices.resolve
    if by_name("NVIDIA RTX A4000") is None or by_name("NVIDIA GeForce RTX 3090") is None:
        pytest.skip("the device catalog does not know the RTX A4000 and RTX 3090")
    yield lambda a, b: float(
        np.linalg.norm(embedding.embed(by_name(a)) - embedding.embed(by_name(b)))
    )


def test_same_workload_on_the_most_similar_device(
    idle_client: TestClient, tlog: TuningLog, catalog: Any
) -> None:
    rec = load_cache(bundled_recordings()["pnpoly_RTX_3090"])
    import_recording(tlog, rec)
    key = rec.workload().key
    # A device the log has never seen, but the catalog knows.
    answer = _best(idle_client, workload=key, device="NVIDIA RTX A4000").json()
    assert answer["tier"] == "similar_device" and answer["device"] == "NVIDIA GeForce RTX 3090"
    optimum = rec.optimum
    assert optimum is not None
    assert answer["workload"] == key and answer["time_ms"] == optimum.time_ms
    expected = catalog("NVIDIA RTX A4000", "NVIDIA GeForce RTX 3090")
    assert expected > 0 and answer["distance"] == pytest.approx(expected)


def test_new_device_and_new_shape_get_the_nearest_shape_of_the_most_similar_device(
    idle_client: TestClient, tlog: TuningLog, tuned: Any, catalog: Any
) -> None:
    """A GPU the log has never seen, asking for a shape nobody tuned, where no model answers:
    the measured nearest shape on the most similar device that has this operator."""
    add_best(tlog, (2048, 2048, 2048), 3.0, device="NVIDIA GeForce RTX 3090")
    sxm = "NVIDIA A100-SXM4-80GB"
    assert catalog(sxm, A100) < catalog(sxm, "NVIDIA GeForce RTX 3090")
    previous = ktune.register_model_choice(None)
    try:
        answer = _best(
            idle_client, operator="matmul", shape="3000x3000x3000", dtype="float32", device=sxm
        ).json()
    finally:
        ktune.register_model_choice(previous)
    assert answer["tier"] == "similar_device_nearest_shape" and answer["device"] == A100
    assert (
        answer["workload"] == "matmul/4096x4096x4096/float32"
        and answer["config"] == tuned[(4096, 4096, 4096)]
    )
    assert answer["distance"] == pytest.approx(catalog(sxm, A100))
    assert answer["query"] == {
        "workload": "matmul/3000x3000x3000/float32",
        "operator": "matmul",
        "shape": [3000, 3000, 3000],
        "dtype": "float32",
        "layout": "",
        "device": sxm,
    }
    # the very workload measured on another device still comes first, however far that device
    same = _best(
        idle_client, operator="matmul", shape="2048x2048x2048", dtype="float32", device=sxm
    ).json()
    assert same["tier"] == "similar_device" and same["device"] == "NVIDIA GeForce RTX 3090"
    # another rank or another dtype is not the same family: nothing measured answers
    assert (
        _best(
            idle_client, operator="matmul", shape="3000x3000", dtype="float32", device=sxm
        ).status_code
        == 422
    )
    assert (
        _best(
            idle_client, operator="matmul", shape="3000x3000x3000", dtype="float16", device=sxm
        ).status_code
        == 404
    )
    # exact answers only: none of this
    assert (
        _best(
            idle_client,
            operator="matmul",
            shape="3000x3000x3000",
            dtype="float32",
            device=sxm,
            fallback="false",
        ).status_code
        == 404
    )
    # a model that ranks this very workload's space for this device is asked first
    previous = ktune.register_model_choice(
        lambda _, query: ktune.Answer(
            query,
            "cost_model",
            query.workload_key,
            query.device,
            {"tile": 94},
            None,
            None,
            0.0,
            None,
        )
    )
    try:
        modelled = _best(
            idle_client, operator="matmul", shape="3000x3000x3000", dtype="float32", device=sxm
        ).json()
    finally:
        ktune.register_model_choice(previous)
    assert modelled["tier"] == "cost_model" and modelled["config"] == {"tile": 94}


def test_cost_model_tier_answers_only_when_a_model_is_registered(
    idle_client: TestClient, tuned: Any
) -> None:
    params = {"operator": "matmul", "shape": "64x64x64", "dtype": "float16", "device": A100}
    assert _best(idle_client, **params).status_code == 404  # no trained model: no answer is made up

    def choice(tlog: TuningLog, query: LookupQuery) -> ktune.Answer:
        return ktune.Answer(
            query=query,
            tier="cost_model",
            workload=query.workload_key,
            device=query.device,
            config={"tile": 2},
            time_ms=0.01,
            trial=None,
            distance=0.0,
            updated_at=None,
        )

    previous = ktune.register_model_choice(choice)
    try:
        answer = _best(idle_client, **params).json()
        assert (
            answer["tier"] == "cost_model"
            and answer["config"] == {"tile": 2}
            and answer["trial"] is None
        )
        # The log's tiers come first.
        assert (
            _best(
                idle_client, operator="matmul", shape="1024x1024x1024", dtype="float32", device=A100
            ).json()["tier"]
            == "exact"
        )
    finally:
        ktune.register_model_choice(previous)


def test_python_api_gives_the_same_answer_as_the_rest_api(
    idle_client: TestClient, db_url: str, tuned: Any
) -> None:
    questions: list[_Question] = [
        {"operator": "matmul", "shape": "1024x4096x1024", "dtype": "float32"},
        {"operator": "matmul", "shape": "3000x3000x3000", "dtype": "float32"},
        {"operator": "matmul", "shape": "500x500x500", "dtype": "float32"},
        {"workload": "matmul/4096x4096x4096/float32"},
    ]
    for q in questions:
        rest = _best(idle_client, device=A100, **q).json()
        python = ktune.lookup(device=A100, db=db_url, **q)
        assert python is not None and python.to_dict() == rest, q
    assert ktune.lookup("matmul", (7, 7, 7), dtype="float16", device=A100, db=db_url) is None
    # ktune's own operator builds the workload: what it cannot take is a malformed question
    with pytest.raises(ktune.LookupInputError) as info:
        ktune.lookup("matmul", (7, 7, 7), dtype="float64", device=A100, db=db_url)
    assert info.value.field == "dtype" and "not supported" in str(info.value)
    with pytest.raises(ktune.LookupInputError) as info:
        ktune.lookup("matmul", (7, 7), dtype="float32", device=A100, db=db_url)
    assert info.value.field == "shape" and "3 dimensions (MxNxK), got 2" in str(info.value)


def test_ktunes_operators_are_asked_as_tune_stores_them(
    idle_client: TestClient, tlog: TuningLog, db_url: str
) -> None:
    """No dtype is the operator's own (float32), as for ``ktune tune --op``; a recorded
    operator's question keeps no dtype."""
    from ktune.search_space.operators import cpu

    wl = cpu.get("cpu_conv2d").workload("1x16x16x16x16x3x3")  # as tune stores it
    w = tlog.get_or_create_workload(wl.key, wl.operator, wl.shape, wl.dtype, wl.layout)
    d = tlog.get_or_create_device("AMD EPYC (2 cores)")
    tlog.add_trials(None, w.id, d.id, "cpu", [TrialIn({"tile": 4}, "4", "ok", time_ms=0.5)])
    params = {"operator": "cpu_conv2d", "shape": "1x16x16x16x16x3x3", "device": d.name}
    answer = _best(idle_client, **params).json()
    assert answer["tier"] == "exact" and answer["workload"] == wl.key
    assert answer["query"]["workload"] == wl.key and answer["query"]["dtype"] == "float32"
    python = ktune.lookup(params["operator"], params["shape"], device=d.name, db=db_url)
    assert python is not None and python.to_dict() == answer
    bad = _best(idle_client, **params, dtype="float16")
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "dtype"]
