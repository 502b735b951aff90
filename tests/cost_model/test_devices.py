"""The device catalog: complete, sourced, and matched by the names vendors report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ktune.cost_model.devices import (
    CATALOG_PATH,
    Catalog,
    CatalogError,
    DeviceSpec,
    default_catalog,
    normalise_name,
    resolve,
    spec_from_cuda_properties,
)

# Every GPU the issue asks for, by the name its driver reports.
REQUIRED = [
    "Tesla V100-SXM2-16GB", "Tesla T4", "NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 3090",
    "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB", "NVIDIA A10", "NVIDIA RTX A4000", "NVIDIA RTX A6000", "NVIDIA L4",
    "NVIDIA L40S", "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H200",
    "AMD Instinct MI100", "AMD Instinct MI210", "AMD Instinct MI250X", "AMD Instinct MI300X",
    "AMD Radeon PRO W6600", "AMD Radeon PRO W6800", "AMD Radeon PRO W7800", "AMD Radeon PRO W7900",
]  # fmt: skip


def test_catalog_has_every_required_gpu_with_every_field_and_a_source() -> None:
    catalog = default_catalog()
    for name in REQUIRED:
        spec = catalog.get(name)
        assert spec is not None, name
        for f in dataclasses.fields(DeviceSpec):
            value = getattr(spec, f.name)
            if f.name != "notes":
                assert value not in ("", None, 0), (name, f.name)
        assert (
            "datasheet" in spec.source.lower()
            or "whitepaper" in spec.source.lower()
            or "specifications" in spec.source.lower()
        )


def test_a100_pcie_values_match_the_vendor_spec_sheet() -> None:
    s = default_catalog().get("NVIDIA A100-PCIE-40GB")
    assert s is not None
    assert (s.sm_count, s.fp32_lanes_per_sm, s.boost_clock_mhz) == (108, 64, 1410)
    assert (s.memory_bandwidth_gbs, s.memory_gb, s.l2_cache_kib) == (1555, 40, 40 * 1024)
    assert (
        s.shared_memory_per_sm_kib,
        s.shared_memory_per_block_kib,
        s.shared_memory_per_block_optin_kib,
    ) == (164, 48, 163)
    assert (s.registers_per_sm, s.max_threads_per_sm, s.warp_size) == (65536, 2048, 32)
    assert (s.peak_fp32_tflops, s.peak_fp16_tflops) == (19.5, 312.0)


def test_peak_fp32_is_consistent_with_lanes_clock_and_sm_count() -> None:
    for spec in default_catalog():
        computed = spec.sm_count * spec.fp32_lanes_per_sm * 2 * spec.boost_clock_mhz / 1e6
        dual_issue = 2 if spec.compute_capability.startswith("gfx11") else 1  # RDNA 3
        assert computed * dual_issue == pytest.approx(spec.peak_fp32_tflops, rel=0.03), spec.name


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),  # Kernel Tuner caches
        ("NVIDIA RTX A4000", "NVIDIA RTX A4000"),
        ("NVIDIA RTX A6000", "NVIDIA RTX A6000"),
        ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"),
        ("AMD Radeon PRO W6600", "AMD Radeon PRO W6600"),
        ("A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),  # older drivers drop the vendor
        ("nvidia a100 pcie 40gb", "NVIDIA A100-PCIE-40GB"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),  # CUDA device names
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB"),
        ("Tesla T4", "Tesla T4"),
        ("NVIDIA L4", "NVIDIA L4"),
        ("AMD Instinct MI250X", "AMD Instinct MI250X"),  # ROCm names
        ("AMD Instinct MI250X/MI250", "AMD Instinct MI250X"),
        ("gfx908:sramecc+:xnack-", "AMD Instinct MI100"),
        ("NVIDIA TITAN RTX", "NVIDIA TITAN RTX"),  # Benchmark Hub caches
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 3060 Laptop GPU"),
        ("AMD Instinct MI50/MI60", "AMD Instinct MI50"),
    ],
)
def test_vendor_names_resolve(reported: str, expected: str) -> None:
    spec = default_catalog().get(reported)
    assert spec is not None and spec.name == expected


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        None,
        "A100",
        "NVIDIA A100",
        "gfx90a",
        "gfx942:sramecc+",
        "RTX 30",
        "gfx906",
        "RTX 3060",
    ],
)
def test_unknown_or_ambiguous_names_do_not_guess(name: str | None) -> None:
    assert default_catalog().get(name) is None


def test_normalise_name() -> None:
    assert normalise_name("  NVIDIA  RTX_A4000 ") == "rtx a4000"
    assert normalise_name("gfx90a:sramecc+:xnack-") == "gfx90a"


def _catalog_without(tmp_path: Path, field: str) -> Path:
    data = json.loads(CATALOG_PATH.read_text())
    del data["devices"][3][field]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("field", ["l2_cache_kib", "warp_size", "source", "vendor"])
def test_a_missing_field_is_a_load_time_error(tmp_path: Path, field: str) -> None:
    with pytest.raises(CatalogError, match=f"missing field.*{field}"):
        Catalog.load(_catalog_without(tmp_path, field))


def test_bad_values_and_clashing_names_are_load_time_errors(tmp_path: Path) -> None:
    data = json.loads(CATALOG_PATH.read_text())
    data["devices"][0]["sm_count"] = "eighty"
    (tmp_path / "a.json").write_text(json.dumps(data))
    with pytest.raises(CatalogError, match="sm_count must be a number"):
        Catalog.load(tmp_path / "a.json")
    data = json.loads(CATALOG_PATH.read_text())
    data["devices"][1]["aliases"].append("NVIDIA RTX A4000")
    (tmp_path / "b.json").write_text(json.dumps(data))
    with pytest.raises(CatalogError, match="claimed by both"):
        Catalog.load(tmp_path / "b.json")
    (tmp_path / "c.json").write_text("{not json")
    with pytest.raises(CatalogError, match="cannot read"):
        Catalog.load(tmp_path / "c.json")


def test_a_complete_stored_spec_wins_over_the_catalog_and_an_incomplete_one_does_not() -> None:
    a4000 = default_catalog().get("NVIDIA RTX A4000")
    assert a4000 is not None
    stored = {**a4000.to_dict(), "sm_count": 50}
    assert resolve("NVIDIA RTX A4000", stored).sm_count == 50  # type: ignore[union-attr]
    assert resolve("NVIDIA RTX A4000", {"sm_count": 50}) == a4000
    assert resolve("Some New GPU") is None


# What cupy.cuda.runtime.getDeviceProperties(0) returns on an A100 PCIe 40GB (CUDA 12).
A100_PROPS = {
    "name": b"NVIDIA A100-PCIE-40GB", "major": 8, "minor": 0, "multiProcessorCount": 108,
    "clockRate": 1410000, "memoryClockRate": 1215000, "memoryBusWidth": 5120,
    "totalGlobalMem": 42298834944, "l2CacheSize": 41943040, "sharedMemPerMultiprocessor": 167936,
    "sharedMemPerBlock": 49152, "sharedMemPerBlockOptin": 166912, "regsPerMultiprocessor": 65536,
    "regsPerBlock": 65536, "maxThreadsPerMultiProcessor": 2048, "maxThreadsPerBlock": 1024,
    "warpSize": 32, "maxBlocksPerMultiProcessor": 32,
}  # fmt: skip


def test_spec_from_cuda_properties_agrees_with_the_catalog() -> None:
    spec = spec_from_cuda_properties(A100_PROPS)
    ref = default_catalog().get("NVIDIA A100-PCIE-40GB")
    assert ref is not None
    assert spec.name == "NVIDIA A100-PCIE-40GB" and spec.compute_capability == "8.0"
    for field in ("sm_count", "fp32_lanes_per_sm", "boost_clock_mhz", "l2_cache_kib",
                  "shared_memory_per_sm_kib", "shared_memory_per_block_optin_kib",
                  "registers_per_sm", "max_threads_per_sm", "max_blocks_per_sm",
                  "warp_size"):  # fmt: skip
        assert getattr(spec, field) == getattr(ref, field), field
    assert spec.memory_bandwidth_gbs == pytest.approx(ref.memory_bandwidth_gbs, rel=0.01)
    assert spec.peak_fp32_tflops == pytest.approx(ref.peak_fp32_tflops, rel=0.02)
    assert spec.peak_fp16_tflops == pytest.approx(ref.peak_fp16_tflops, rel=0.02)


def test_spec_from_cuda_properties_rejects_incomplete_or_unknown_devices() -> None:
    props = dict(A100_PROPS)
    del props["clockRate"]
    with pytest.raises(CatalogError, match="clockRate"):
        spec_from_cuda_properties(props)
    with pytest.raises(CatalogError, match="compute capability 3.5"):
        spec_from_cuda_properties({**A100_PROPS, "major": 3, "minor": 5})
