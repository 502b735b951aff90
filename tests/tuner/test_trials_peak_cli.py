"""``ktune trials`` shows each trial's GFLOP/s and GB/s with their fraction of the device's
peak where the device's spec knows it (issue 25, item 5)."""

from __future__ import annotations

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.testing.records import job_spec, trial

pytestmark = pytest.mark.both_databases


def _plant(db_url: str, device: str, spec: dict[str, object] | None) -> int:
    with TuningLog.open(db_url) as tlog:
        key = "matmul/1024x1024x1024/float16"
        wl = tlog.get_or_create_workload(key, "matmul", (1024, 1024, 1024), "float16")
        dev = tlog.get_or_create_device(device, spec=spec)
        job = tlog.create_job(job_spec(wl, dev), state="running")
        tlog.add_trials(job.id, wl.id, dev.id, "replay", [trial(0, time_ms=0.5)], clock_s=1.0)
        tlog.set_job_state(job.id, "done")
        return job.id


def test_trials_show_the_fraction_of_peak(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    gpu = _plant(db_url, "NVIDIA A100-PCIE-40GB", None)
    cpu = _plant(db_url, "Some CPU (2 cores, avx2)", {"kind": "cpu"})
    assert main(["trials", str(gpu), "--db", db_url]) == 0
    out = capsys.readouterr().out
    # 2 * 1024^3 FLOP in 0.5 ms = 4295 GFLOP/s, 1.4% of the A100's 312 TFLOP/s (fp16 dense);
    # 6 MiB in 0.5 ms = 12.6 GB/s, 0.8% of its 1555 GB/s
    assert "4295.0 (1%)" in out and "12.6 (1%)" in out and "of peak" in out
    assert main(["trials", str(cpu), "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "4295.0" in out and "4295.0 (" not in out  # no peak known for this CPU
