"""Fixtures of the db tests: an open tuning log on each backend, with a device and a workload."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktune.db import DeviceRecord, TuningLog, WorkloadRecord


@pytest.fixture
def log(db_url: str) -> Iterator[TuningLog]:
    with TuningLog.open(db_url) as opened:
        yield opened


@pytest.fixture
def device(log: TuningLog) -> DeviceRecord:
    return log.get_or_create_device("NVIDIA A100-PCIE-40GB", "nvidia", "sm_80")


@pytest.fixture
def workload(log: TuningLog) -> WorkloadRecord:
    return log.get_or_create_workload("matmul/1024x1024x1024/float32", "matmul", (1024, 1024, 1024))
