"""Operator spaces: workloads, device-limit constraints, rendering and features."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ktune.search_space.operators import DeviceLimits, OperatorError, get, names
from ktune.search_space.workload import Workload

A100 = DeviceLimits.for_arch("sm_80")
WORKLOADS = [
    ("matmul", "1024x1024x1024", "float32", ""),
    ("matmul", "1024x1024x1024", "float16", ""),
    ("conv2d", "8x64x56x56x64x3x3x1x1x1x1x1x1", "float32", "NHWC"),
    ("reduction", "1024x4096", "float16", "max"),
    ("softmax", "1024x4096", "float32", ""),
    ("transpose", "4096x2048", "float32", ""),
]


def test_registry_lists_the_operators() -> None:
    assert names() == ["matmul", "conv2d", "reduction", "softmax", "transpose"]
    with pytest.raises(OperatorError, match="unknown operator 'gemm'"):
        get("gemm")


@pytest.mark.parametrize(
    ("name", "shape", "dtype", "layout", "key"),
    [
        ("matmul", "64x32x16", "float16", "", "matmul/64x32x16/float16"),
        ("conv2d", "1x3x8x8x4x3x3", "float32", "", "conv2d/1x3x8x8x4x3x3x1x1x1x1/float32/NCHW"),
        (
            "conv2d",
            "1x3x8x8x4x3x3x2x2x1x1x1x1",
            "float32",
            "NHWC",
            "conv2d/1x3x8x8x4x3x3x2x2x1x1/float32/NHWC_pad1x1",
        ),
        ("reduction", "10x20", "float32", "", "reduction/10x20/float32/sum"),
    ],
)
def test_workload_keys_are_canonical_and_round_trip(name, shape, dtype, layout, key) -> None:
    op = get(name)
    wl = op.workload(shape, dtype, layout)
    assert wl.key == key
    again = Workload.from_key(key)
    assert op.workload(again.shape, again.dtype, again.layout) == wl


@pytest.mark.parametrize(
    ("name", "shape", "dtype", "layout", "message"),
    [
        ("matmul", "64x32", "float32", "", "needs 3 dimensions"),
        ("matmul", "64x0x3", "float32", "", "must be positive"),
        ("matmul", "64xAx3", "float32", "", "not like 4096x4096"),
        ("matmul", "8x8x8", "int8", "", "dtype 'int8' not supported"),
        ("reduction", "8x8", "float32", "mean", "layout 'mean' not supported"),
        ("conv2d", "1x3x2x2x4x3x3", "float32", "", "does not fit"),
        (
            "conv2d",
            "1x3x8x8x4x3x3x1x1x1x1x1x1",
            "float32",
            "NCHW_pad1x1",
            "both in the shape and in the layout",
        ),
    ],
)
def test_bad_workloads_are_one_line_errors(name, shape, dtype, layout, message) -> None:
    with pytest.raises(OperatorError, match=message) as info:
        get(name).workload(shape, dtype, layout)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "shape", "dtype", "layout"), WORKLOADS)
def test_every_config_respects_the_device_limits(name, shape, dtype, layout) -> None:
    op = get(name)
    wl = op.workload(shape, dtype, layout)
    space = op.space(wl, A100)
    assert len(space) > 20
    for config in space.configs(np.arange(len(space))[:: max(1, len(space) // 300)]):
        launch = op.launch(config, wl)
        assert 32 <= launch.threads_per_block <= A100.max_threads_per_block
        assert launch.shared_mem <= A100.shared_mem_per_block_optin
        assert (
            all(g >= 1 for g in launch.grid) and launch.grid[1] <= 65535 and launch.grid[2] <= 65535
        )
        features = op.derived_features(config, wl)
        assert features and all(
            isinstance(v, float) and math.isfinite(v) for v in features.values()
        )


def test_smaller_devices_get_smaller_spaces() -> None:
    op = get("matmul")
    wl = op.workload("4096x4096x4096", "float16")
    big = op.space(wl, DeviceLimits.for_arch("sm_90"))
    mid = op.space(wl, A100)
    small = op.space(wl, DeviceLimits.for_arch("sm_86"))
    assert len(big) > len(mid) > len(small)
    for config in small.configs(np.arange(len(small))):
        assert op.launch(config, wl).shared_mem <= 99 * 1024
    with pytest.raises(OperatorError, match="sm_80 or newer"):
        op.space(wl, DeviceLimits.for_arch("sm_75"))


def test_vector_widths_follow_the_alignment_of_odd_sizes() -> None:
    op = get("matmul")
    odd = op.space(op.workload("1001x1003x999", "float16"), A100)
    assert {c["vector_width"] for c in odd.configs(np.arange(len(odd)))} == {1}
    even = op.space(op.workload("1000x1004x1000", "float16"), A100)
    assert {c["vector_width"] for c in even.configs(np.arange(len(even)))} == {1, 2, 4}


def test_limits_adapt_device_specs_in_kib_and_in_bytes() -> None:
    catalog_like = {
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "max_threads_per_block": 1024,
        "shared_memory_per_block_kib": 48,
        "shared_memory_per_block_optin_kib": 227,
        "registers_per_block": 65536,
        "warp_size": 32,
        "sm_count": 132,
        "l2_cache_kib": 51200,
    }
    limits = DeviceLimits.from_spec(catalog_like)
    assert limits.arch == "sm_90" and limits.shared_mem_per_block_optin == 227 * 1024
    assert limits.l2_bytes == 50 * 1024 * 1024 and limits.sm_count == 132

    class Spec:  # attribute access, as cost_model.devices.DeviceSpec
        compute_capability = "8.6"
        shared_memory_per_block_optin_kib = 99.0
        max_threads_per_block = 1024

    assert DeviceLimits.from_spec(Spec()).shared_mem_per_block_optin == 99 * 1024
    with pytest.raises(OperatorError):
        DeviceLimits.from_spec({"compute_capability": "x"})


@pytest.mark.parametrize(("name", "shape", "dtype", "layout"), WORKLOADS)
def test_rendered_sources_carry_the_config_and_define_nothing_else(
    name, shape, dtype, layout
) -> None:
    op = get(name)
    wl = op.workload(shape, dtype, layout)
    space = op.space(wl, A100)
    config = space.config(len(space) // 2)
    src = op.render(config, wl)
    assert "#define" not in src.body and "#include" not in src.body
    assert src.code.startswith("#define KERNEL_NAME " + src.name)
    for key, value in config.items():
        if isinstance(value, int):
            assert re.search(rf"^#define {key} {value}$", src.code, re.MULTILINE), key
    batched = src.renamed("k7", "ns7")
    assert "#define KERNEL_NAME k7" in batched and batched.rstrip().endswith(
        "#undef " + list(src.defines)[-1]
    )


def test_flop_and_byte_counts() -> None:
    mm = get("matmul")
    assert mm.flops(mm.workload("2x3x4", "float32")) == 48
    assert mm.bytes_moved(mm.workload("2x3x4", "float16")) == (8 + 12 + 6) * 2
    conv = get("conv2d")
    wl = conv.workload("1x2x5x5x3x3x3", "float32")  # output 3x3
    assert conv.flops(wl) == 2 * 3 * 9 * 2 * 9
    tr = get("transpose")
    assert tr.bytes_moved(tr.workload("10x20", "float32")) == 1600
