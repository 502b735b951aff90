"""The endpoints that explain jobs: importance, work, job facets and filters, compare bands.

Their queries (``ktune.db.browse``) run on both databases.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TrialIn, TuningLog
from ktune.testing.records import job_spec, trial
from tests.server.client import finished, submit, wait_until

pytestmark = pytest.mark.both_databases


def _plant(tlog: TuningLog) -> dict[str, int]:
    """Six finished jobs: random and optuna, seeds 0-2, on one workload; one failed job on a
    matmul workload on another device. Returns their ids by name."""
    wl = tlog.get_or_create_workload("toy/8x8/-", "toy", (8, 8))
    mm = tlog.get_or_create_workload("matmul/64x32x16/float32", "matmul", (64, 32, 16))
    gpu = tlog.get_or_create_device("GPU A")
    other = tlog.get_or_create_device("GPU B")
    ids: dict[str, int] = {}
    for strategy, scale in (("random", 2.0), ("optuna", 1.0)):
        for seed in range(3):
            job = tlog.create_job(job_spec(wl, gpu, strategy=strategy, seed=seed), state="running")
            rows = [trial(i, time_ms=scale * (10 - i) + seed) for i in range(5)]
            tlog.add_trials(job.id, wl.id, gpu.id, "replay", rows, clock_s=5.0)
            tlog.set_job_state(job.id, "done")
            ids[f"{strategy}{seed}"] = job.id
    job = tlog.create_job(job_spec(mm, other, strategy="random", backend="cpu"), state="running")
    tlog.add_trials(job.id, mm.id, other.id, "cpu", [trial(0, time_ms=0.5)], clock_s=1.0)
    tlog.set_job_state(job.id, "failed", error="planted")
    ids["matmul"] = job.id
    return ids


@pytest.fixture
def planted(idle_client: TestClient, db_url: str) -> dict[str, int]:
    with TuningLog.open(db_url) as tlog:
        return _plant(tlog)


def test_facets_count_jobs_by_state_under_the_other_filters(
    idle_client: TestClient, planted: dict[str, int]
) -> None:
    every = idle_client.get("/v1/job-facets").json()
    assert every["total"] == 7
    assert every["by_state"] == {"queued": 0, "running": 0, "done": 6, "failed": 1, "cancelled": 0}
    assert every["workloads"] == ["matmul/64x32x16/float32", "toy/8x8/-"]
    assert every["devices"] == ["GPU A", "GPU B"]
    assert every["strategies"] == ["optuna", "random"]
    assert every["backends"] == ["cpu", "replay"]
    random_done = idle_client.get(
        "/v1/job-facets", params={"strategy": "random", "state": "done"}
    ).json()
    assert random_done["total"] == 3  # the state narrows the total, not the counts by state
    assert random_done["by_state"]["done"] == 3 and random_done["by_state"]["failed"] == 1


def test_jobs_filter_by_strategy_and_backend_and_page(
    idle_client: TestClient, planted: dict[str, int]
) -> None:
    page = idle_client.get("/v1/jobs", params={"strategy": "optuna", "limit": 2}).json()
    assert [j["id"] for j in page["items"]] == [planted["optuna2"], planted["optuna1"]]
    assert page["next_offset"] == 2
    rest = idle_client.get("/v1/jobs", params={"strategy": "optuna", "limit": 2, "offset": 2})
    assert [j["id"] for j in rest.json()["items"]] == [planted["optuna0"]]
    assert rest.json()["next_offset"] is None
    cpu = idle_client.get("/v1/jobs", params={"backend": "cpu"}).json()["items"]
    assert [j["id"] for j in cpu] == [planted["matmul"]]


def test_trials_carry_their_repeated_times(
    idle_client: TestClient, planted: dict[str, int]
) -> None:
    items = idle_client.get(f"/v1/jobs/{planted['random0']}/trials").json()["items"]
    assert items[0]["times_ms"] == [items[0]["time_ms"]] * 3


def test_importance_names_its_method_and_ranks_the_knobs(
    idle_client: TestClient, db_url: str
) -> None:
    with TuningLog.open(db_url) as tlog:
        wl = tlog.get_or_create_workload("toy/8x8/-", "toy", (8, 8))
        dev = tlog.get_or_create_device("GPU A")
        job = tlog.create_job(job_spec(wl, dev), state="running")
        rows = [
            TrialIn(
                config={"tile": t, "unroll": u},
                config_key=f"{t},{u}",
                status="ok",
                time_ms=float(2**t) * (1.01 if u else 1.0),
                seq=4 * t + u,
            )
            for t in range(4)
            for u in range(4)
        ]
        rows.append(TrialIn({"tile": 9, "unroll": 0}, "9,0", "compile_error", seq=16, error="x"))
        tlog.add_trials(job.id, wl.id, dev.id, "replay", rows)
    answer = idle_client.get(f"/v1/jobs/{job.id}/importance").json()
    assert "functional ANOVA" in answer["method"]
    assert (answer["n_trials"], answer["n_ok"]) == (17, 16)
    tile, unroll = answer["knobs"]
    assert tile["name"] == "tile" and tile["importance"] > 0.99 and unroll["importance"] < 0.01
    assert [v["value"] for v in tile["values"]] == [0, 1, 2, 3, 9]
    assert tile["values"][-1] == {
        "value": 9,
        "n": 1,
        "n_ok": 0,
        "geomean_ms": None,
        "best_ms": None,
    }
    assert idle_client.get("/v1/jobs/999/importance").status_code == 404


def test_work_gives_flops_and_bytes_where_the_operator_knows_them(
    idle_client: TestClient, planted: dict[str, int]
) -> None:
    mm = idle_client.get(f"/v1/jobs/{planted['matmul']}/work").json()
    assert mm["flops"] == 2 * 64 * 32 * 16
    assert mm["best_gflops"] == pytest.approx(mm["flops"] / (0.5 * 1e6))
    assert mm["best_gbps"] == pytest.approx(mm["bytes"] / (0.5 * 1e6))
    toy = idle_client.get(f"/v1/jobs/{planted['random0']}/work").json()
    assert (
        toy["flops"] is None and toy["best_gflops"] is None and "not an operator" in toy["reason"]
    )


def _end(band: dict[str, Any]) -> tuple[float, float, float]:
    return band["median"][-1], band["q25"][-1], band["q75"][-1]


def test_compare_bands_group_by_strategy_across_seeds(
    idle_client: TestClient, planted: dict[str, int]
) -> None:
    answer = idle_client.get("/v1/compare", params={"workload": "toy/8x8/-"}).json()
    assert answer["reference"] == "none" and not answer["normalised"]  # one workload, one device
    assert {j["workload"] for j in answer["jobs"]} == {"toy/8x8/-"}
    assert {j["device"] for j in answer["jobs"]} == {"GPU A"}
    bands = {b["strategy"]: b for b in answer["bands"]}
    assert set(bands) == {"random", "optuna"}
    # trial i takes scale * (10 - i) + seed: random's seeds end at 12, 13, 14, optuna's at 6, 7, 8
    assert _end(bands["random"]) == (13.0, 12.5, 13.5)
    assert _end(bands["optuna"]) == (7.0, 6.5, 7.5)
    assert bands["random"]["x"] == [1.0, 2.0, 3.0, 4.0, 5.0] and bands["random"]["n"][-1] == 3

    chosen = f"{planted['optuna0']},{planted['matmul']}"
    mixed = idle_client.get("/v1/compare", params={"jobs": chosen, "axis": "time"}).json()
    assert mixed["reference"] == "best known" and mixed["normalised"]  # two workloads
    assert [j["best"] for j in mixed["jobs"]] == [1.0, 1.0]
    none = idle_client.get("/v1/compare", params={"jobs": chosen, "normalise": "optimum"})
    assert none.status_code == 422 and "no recorded optimum" in none.text
    assert idle_client.get("/v1/compare", params={"jobs": "1,a"}).status_code == 422
    assert idle_client.get("/v1/compare", params={"state": "nope"}).status_code == 422


def test_compare_normalises_replayed_jobs_to_their_recordings_optimum(client: TestClient) -> None:
    jobs = [submit(client, seed=s, budget={"trials": 12}) for s in (1, 2)]
    for job in jobs:
        wait_until(client, job["id"], finished)
    answer = client.get("/v1/compare", params={"jobs": ",".join(str(j["id"]) for j in jobs)}).json()
    assert answer["reference"] == "optimum"
    for job in answer["jobs"]:
        optimum = client.get(f"/v1/jobs/{job['id']}").json()["space"]["optimum_ms"]
        assert job["reference_ms"] == optimum
        assert math.isclose(job["best"], job["best_time_ms"] / optimum)
    (band,) = answer["bands"]
    first, second = (j["best"] for j in answer["jobs"])
    assert band["median"][-1] == pytest.approx((first + second) / 2) and band["n"][-1] == 2
