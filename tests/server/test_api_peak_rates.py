"""GFLOP/s, GB/s and the fraction of the device's peak per trial (issue 25, item 5): in the REST
trials and the work endpoint, from the device's stored spec or ktune's catalog; null where
the peak is unknown (a CPU, float64, a device outside the catalog)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.testing.records import job_spec, trial
from ktune.tuner.insight import peak_of, work_of
from tests.server.client import make_client

pytestmark = pytest.mark.both_databases

A100 = "NVIDIA A100-PCIE-40GB"  # catalog: 19.5 TFLOP/s fp32, 312 fp16 (dense), 1555 GB/s
SHAPE = (1024, 1024, 1024)


@pytest.fixture
def planted(db_url: str) -> dict[str, int]:
    with TuningLog.open(db_url) as tlog:
        ids = {}
        for name, device, dtype, stored in (
            ("fp16", A100, "float16", None),
            ("fp32", A100, "float32", None),
            ("fp64", A100, "float64", None),
            ("cpu", "AMD EPYC (2 cores, avx2)", "float32", {"kind": "cpu", "cores": 2}),
        ):
            key = f"matmul/1024x1024x1024/{dtype}"
            wl = tlog.get_or_create_workload(key, "matmul", SHAPE, dtype)
            dev = tlog.get_or_create_device(device, spec=stored)
            job = tlog.create_job(job_spec(wl, dev), state="running")
            rows = [trial(0, time_ms=0.5), trial(1, status="compile_error", time_ms=None)]
            tlog.add_trials(job.id, wl.id, dev.id, "replay", rows, clock_s=1.0)
            tlog.set_job_state(job.id, "done")
            ids[name] = job.id
    return ids


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    yield from make_client(db_url, runner_concurrency=0)


def _trials(client: TestClient, job: int) -> list[dict[str, float | None]]:
    return client.get(f"/v1/jobs/{job}/trials").json()["items"]  # type: ignore[no-any-return]


def test_a_catalog_gpu_gives_fractions_of_its_peak(
    client: TestClient, planted: dict[str, int]
) -> None:
    flops = 2 * 1024**3
    for name, peak_tflops in (("fp16", 312.0), ("fp32", 19.5)):
        moved = work_of(f"matmul/1024x1024x1024/float{name[2:]}").bytes
        assert moved is not None
        ok, failed = _trials(client, planted[name])
        assert ok["gflops"] == pytest.approx(flops / 0.5e6)
        assert ok["peak_flops_fraction"] == pytest.approx(flops / 0.5e6 / (peak_tflops * 1e3))
        assert ok["peak_bandwidth_fraction"] == pytest.approx(moved / 0.5e6 / 1555.0)
        assert failed["gflops"] is None and failed["peak_flops_fraction"] is None
        work = client.get(f"/v1/jobs/{planted[name]}/work").json()
        assert (work["peak_gflops"], work["peak_gbps"]) == (peak_tflops * 1e3, 1555.0)


def test_unknown_peaks_are_null_with_a_reason(client: TestClient, planted: dict[str, int]) -> None:
    (fp64, _) = _trials(client, planted["fp64"])
    assert fp64["gflops"] is not None and fp64["peak_flops_fraction"] is None
    assert fp64["peak_bandwidth_fraction"] is not None  # bandwidth does not depend on dtype
    (cpu, _) = _trials(client, planted["cpu"])
    assert cpu["gflops"] is not None and cpu["gbps"] is not None
    assert cpu["peak_flops_fraction"] is None and cpu["peak_bandwidth_fraction"] is None
    work = client.get(f"/v1/jobs/{planted['cpu']}/work").json()
    assert work["peak_gflops"] is None and "no peak rates known" in work["peak_reason"]


def test_a_stored_spec_is_the_peak_before_the_catalog() -> None:
    stored = peak_of(A100, None, "float32")
    assert stored.gflops == 19.5e3
    from ktune.cost_model.devices import default_catalog

    spec = default_catalog().get(A100)
    assert spec is not None
    own = {**spec.to_dict(), "peak_fp32_tflops": 10.0, "memory_bandwidth_gbs": 1000.0}
    mine = peak_of("My A100", own, "float32")
    assert (mine.gflops, mine.gbps) == (10e3, 1000.0)
