"""The typed options of job sources: validated, to and from a job's JSON, and read back from
what ktune stored before they existed, so that older jobs resume."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ktune.search_space.workload import Workload
from ktune.testing.planted import FAKE_GPU
from ktune.tuner.measure import ray_pool
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.measure.timing import TimingSettings
from ktune.tuner.sources import (
    CpuOptions,
    CustomOptions,
    Environment,
    GpuOptions,
    JobOptions,
    RayOptions,
    ReplayOptions,
    SourceError,
    bundled_recordings,
    open_source,
    options_from_json,
)
from ktune.tuner.sources.recordings import BUNDLED

CONV = bundled_recordings()["convolution_A4000"]
CONV_T1 = BUNDLED / "convolution_t1.json"
CONV_DIGEST = "fd773e882875902173ed50a7f9db6a28260ea25b87cf26211a7c627b94c0b8e8"
TIMING = {"warmup": 3, "min_repeats": 10, "min_time_s": 0.05, "max_repeats": 1000, "flush_l2": True}
#: the CPU the stored CPU job was created on
CPU = {
    "name": "Planted CPU (8 cores)",
    "kind": "cpu",
    "vendor": "AMD",
    "architecture": "x86_64",
    "cores": 8,
    "vector_bytes": 32,
    "vector_registers": 16,
    "l1d_bytes": 32768,
    "l2_bytes": 524288,
    "l3_bytes": 33554432,
    "compiler": "cc 12",
}

#: (backend, options column) of jobs created by ktune before the typed options, one per kind;
#: "{T1}" stands for the custom kernel's T1 spec, written where the test runs
STORED: dict[str, tuple[str, dict[str, Any]]] = {
    "replay": (
        "replay",
        {
            "replay": str(CONV),
            "digest": CONV_DIGEST,
            "spec": None,
            "constraints": [],
            "replay_speed": None,
        },
    ),
    "replay with spec, constraints, speed, patience": (
        "replay",
        {
            "replay": str(CONV),
            "digest": CONV_DIGEST,
            "spec": str(CONV_T1),
            "constraints": ["block_size_x <= 64"],
            "replay_speed": 50.0,
            "patience": 7,
        },
    ),
    "gpu operator": (
        "cupy",
        {
            "operator": "matmul",
            "workload": "matmul/256x256x256/float16",
            "t1": None,
            "device": 0,
            "device_name": "Planted GPU",
            "constraints": ["stages == 2"],
            "timeout_s": 12.0,
            "timing": TIMING,
            "space": "7e5ca72d81315174831cc125e18be99c0eb85eeff3cc132a633817b770b45021",
            "ray": None,
            "patience": 5,
        },
    ),
    "ray": (
        "ray",
        {
            "operator": "matmul",
            "workload": "matmul/256x256x256/float32",
            "t1": None,
            "device": 0,
            "device_name": "Planted GPU",
            "constraints": [],
            "timeout_s": 30.0,
            "timing": TIMING,
            "space": "b766b242388d47e9b313667917b8a7bf698218798045f358579a0966f27deb56",
            "ray": {
                "address": "ray://head:10001",
                "workers": 3,
                "gpu_type": "A100",
                "num_gpus": 1.0,
            },
        },
    ),
    "custom kernel": (
        "cupy",
        {
            "operator": "custom",
            "workload": "convolution_milo/4096x4096/-",
            "t1": "{T1}",
            "device": 0,
            "device_name": "Planted GPU",
            "constraints": [],
            "timeout_s": 30.0,
            "timing": TIMING,
            "space": "10461a12cbd7fea3cf8fafd063ecccce180c49444a3beef698e8b951d700dd2a",
            "ray": None,
        },
    ),
    "cpu operator": (
        "cpu",
        {
            "operator": "cpu_matmul",
            "workload": "cpu_matmul/48x40x24/float32",
            "device_name": "Planted CPU (8 cores)",
            "constraints": [],
            "timeout_s": 5.0,
            "timing": TIMING,
            "space": "3d2ce9d160887c11d6ef5c1685a1bad912ce6d1d70da9379daac1eac837c40f5",
            "patience": 3,
        },
    ),
}
KINDS = {
    "replay": ReplayOptions,
    "replay with spec, constraints, speed, patience": ReplayOptions,
    "gpu operator": GpuOptions,
    "ray": RayOptions,
    "custom kernel": CustomOptions,
    "cpu operator": CpuOptions,
}
#: where each stored job finds its device again
PLANTED = Environment(
    local_gpus=lambda: [dict(FAKE_GPU)],
    ray_gpu=lambda placement: dict(FAKE_GPU),
    local_cpu=lambda: dict(CPU),
)


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The stored options of a kind, with a custom kernel's T1 spec and kernel in place."""
    monkeypatch.delenv(ray_pool.ADDRESS_ENV, raising=False)
    t1 = tmp_path / "convolution_t1.json"
    t1.write_text(CONV_T1.read_text())
    (tmp_path / "convolution_milo.cu").write_text(
        'extern "C" __global__ void convolution_kernel(float* o, const float* i) {}\n'
    )

    def of(kind: str) -> tuple[str, dict[str, Any]]:
        backend, options = STORED[kind]
        return backend, json.loads(json.dumps(options).replace("{T1}", str(t1)))

    return of


@pytest.mark.parametrize("kind", list(STORED))
def test_stored_options_of_today_read_back_as_their_kind_and_write_back_unchanged(
    stored, kind: str
) -> None:
    backend, data = stored(kind)
    options = JobOptions.from_json(backend, data)
    assert type(options.source) is KINDS[kind] and options.backend == backend
    assert options.patience == data.get("patience")
    assert options.to_json() == data


@pytest.mark.parametrize("kind", list(STORED))
def test_a_job_stored_before_the_typed_options_opens_its_source_again(stored, kind: str) -> None:
    """What a resume does: the stored options open the same source, on the same device and
    space (the pinned name and fingerprint match), and pin the same options again."""
    backend, data = stored(kind)
    options = JobOptions.from_json(backend, data)
    source = open_source(options.source, PLANTED)
    assert source.backend_name == backend
    assert JobOptions(source.options, options.patience).to_json() == data


def test_a_stored_job_on_another_device_space_or_recording_is_refused(stored) -> None:
    backend, data = stored("gpu operator")
    other = replace(PLANTED, local_gpus=lambda: [{**FAKE_GPU, "name": "NVIDIA H100"}])
    with pytest.raises(SourceError, match="the job ran on Planted GPU, device 0 is NVIDIA H100"):
        open_source(options_from_json(backend, data), other)
    changed = {**data, "space": "0" * 64}
    with pytest.raises(SourceError, match="search space changed since it started"):
        open_source(options_from_json(backend, changed), PLANTED)
    backend, data = stored("replay")
    with pytest.raises(SourceError, match="the recording changed since the job started"):
        open_source(options_from_json(backend, {**data, "digest": "0" * 64}), PLANTED)
    backend, data = stored("cpu operator")
    with pytest.raises(SourceError, match="the job ran on Planted CPU .* this machine is Other"):
        open_source(
            options_from_json(backend, data),
            Environment(local_cpu=lambda: {**CPU, "name": "Other"}),
        )


MATMUL = Workload("matmul", (256, 256, 256), "float16")
PLACEMENT = RayPlacement("ray://head:10001", 2, "H100")
NEW_OPTIONS = [
    ReplayOptions(recording=CONV),
    ReplayOptions(
        recording=CONV,
        digest=CONV_DIGEST,
        spec=CONV_T1,
        constraints=("block_size_x <= 64",),
        speed=2.5,
    ),
    GpuOptions(operator="matmul", workload=MATMUL),
    GpuOptions(
        operator="matmul",
        workload=MATMUL,
        device=1,
        constraints=("stages == 2",),
        timeout_s=3,
        timing=TimingSettings(warmup=1, min_repeats=2),
        device_name="Planted GPU",
        space_fingerprint="ab" * 32,
    ),
    RayOptions(operator="matmul", workload=MATMUL, placement=PLACEMENT),
    CustomOptions(t1=Path("/specs/kernel.json")),
    CustomOptions(
        t1=Path("/specs/kernel.json"),
        placement=PLACEMENT,
        workload=Workload("kernel", (4096, 4096)),
        device_name="Planted GPU",
    ),
    CpuOptions(operator="cpu_matmul", workload=Workload("cpu_matmul", (48, 40, 24), "float64")),
]


@pytest.mark.parametrize("options", NEW_OPTIONS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("patience", [None, 4])
def test_options_round_trip_through_the_json_a_job_stores(
    options: Any, patience: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ray_pool.ADDRESS_ENV, raising=False)
    job = JobOptions(options, patience)
    data = json.loads(json.dumps(job.to_json()))
    assert JobOptions.from_json(job.backend, data) == job


def test_the_backend_of_each_kind() -> None:
    assert [o.backend for o in NEW_OPTIONS] == [
        "replay",
        "replay",
        "cupy",
        "cupy",
        "ray",
        "cupy",
        "ray",
        "cpu",
    ]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: GpuOptions(operator="matmul", workload=MATMUL, timeout_s=0),
            "timeout must be > 0",
        ),
        (lambda: ReplayOptions(recording=CONV, speed=1e9), "replay speed must be"),
        (lambda: CpuOptions(operator="cpu_conv2d", workload=MATMUL), "not one of operator"),
        (lambda: JobOptions(ReplayOptions(recording=CONV), patience=0), "patience must be > 0"),
    ],
)
def test_options_validate_themselves(build, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        build()


@pytest.mark.parametrize(
    ("backend", "data", "message"),
    [
        ("opencl", {}, "backend 'opencl' is not one this ktune can run"),
        ("replay", {"replay": 3}, "replay must be a non-empty string"),
        ("replay", {"replay": "x.json", "constraints": "a < 2"}, "constraints must be a list"),
        ("cupy", {"operator": "matmul"}, "workload must be a non-empty string"),
        ("cupy", {"operator": "matmul", "workload": "matmul/x/f"}, "is not like 64x64"),
        (
            "cupy",
            {"operator": "matmul", "workload": "matmul/8x8x8/float32", "timing": {"bogus": 1}},
            "timing must be timing settings",
        ),
        ("ray", {"operator": "matmul", "workload": "matmul/8x8x8/float32"}, "names no Ray"),
        (
            "cpu",
            {"operator": "cpu_matmul", "workload": "cpu_matmul/8x8x8/float32", "patience": -1},
            "patience must be > 0",
        ),
    ],
)
def test_unusable_stored_options_are_one_line_source_errors(
    backend: str, data: dict[str, Any], message: str
) -> None:
    with pytest.raises(SourceError, match=message) as caught:
        JobOptions.from_json(backend, data)
    assert "\n" not in str(caught.value)
