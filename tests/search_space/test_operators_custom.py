"""The custom operator: a user's kernel from Python or from a T1 spec, Kernel Tuner style."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ktune.search_space import Value
from ktune.search_space.formats import FormatError
from ktune.search_space.operators import DeviceLimits, OperatorError
from ktune.search_space.operators.custom import CustomOperator

VECTOR_ADD = """
extern "C" __global__ void vector_add(float* c, const float* a, const float* b, int n) {
    int i = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
    for (int t = 0; t < tile_size_x; ++t, i += block_size_x)
        if (i < n) c[i] = a[i] + b[i];
}
"""
RECORDED = Path(__file__).resolve().parents[2] / "search_space" / "recorded"


def vector_add(n: int = 1000) -> CustomOperator:
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    return CustomOperator(
        "vector_add",
        VECTOR_ADD,
        "vector_add",
        n,
        {"block_size_x": [32, 64, 128, 256, 2048], "tile_size_x": [1, 2, 4]},
        [np.zeros(n, np.float32), a, b, np.int32(n)],
        restrictions=["block_size_x * tile_size_x <= 512"],
        answer=[a + b, None, None, None],
        grid_div_x=["block_size_x", "tile_size_x"],
        flops=n,
    )


def _int(value: Value) -> int:
    """A config value that these spaces hold as an int."""
    assert isinstance(value, int), value
    return value


def test_python_kernel_space_launch_and_reference() -> None:
    op = vector_add()
    wl = op.workload()
    assert wl.key == "vector_add/1000/-"
    space = op.space(wl, DeviceLimits.for_arch("sm_80"))
    configs = space.configs(np.arange(len(space)))
    assert all(_int(c["block_size_x"]) * _int(c["tile_size_x"]) <= 512 for c in configs)
    assert {c["block_size_x"] for c in configs} == {32, 64, 128, 256}  # 2048 > max threads
    launch = op.launch({"block_size_x": 64, "tile_size_x": 4}, wl)
    assert launch.grid == (4, 1, 1) and launch.block == (64, 1, 1)  # ceil(1000 / 256)
    args = op.arguments(wl, np.random.default_rng(1))
    assert args.outputs == (0,) and args.values[0] is not op.values[0]
    (ref,) = op.reference(wl, args)
    np.testing.assert_array_equal(ref, op.values[1] + op.values[2])
    src = op.render({"block_size_x": 64, "tile_size_x": 4}, wl)
    assert "#define block_size_x 64" in src.code and "#define block_size_y 1" in src.code
    assert not src.batchable
    assert (
        op.tolerance(wl).check(ref + 5e-7, ref)[0]
        and not op.tolerance(wl).check(ref + 1e-3, ref)[0]
    )


def test_bad_custom_definitions_are_rejected() -> None:
    with pytest.raises(OperatorError, match="grid divisor 'tile'"):
        CustomOperator(
            "k", VECTOR_ADD, "k", 10, {"block_size_x": [32]}, [np.zeros(10)], grid_div_x=["tile"]
        )
    with pytest.raises(OperatorError, match="answer has 1 entries for 2"):
        CustomOperator(
            "k",
            VECTOR_ADD,
            "k",
            10,
            {"block_size_x": [32]},
            [np.zeros(10), np.int32(1)],
            answer=[None],
        )
    with pytest.raises(OperatorError, match="problem_size"):
        CustomOperator("k", VECTOR_ADD, "k", (0, 3), {"block_size_x": [32]}, [])


def test_t1_spec_builds_the_kernel_its_space_and_arguments() -> None:
    source = 'extern "C" __global__ void convolution_kernel(float* o, const float* i) {}'
    op = CustomOperator.from_t1(RECORDED / "convolution_t1.json", source=source)
    wl = op.workload()
    assert op.kernel_name == "convolution_kernel" and op.problem_size == (4096, 4096)
    space = op.space(wl, DeviceLimits.for_arch("sm_80"))
    assert len(space) > 1000
    config = space.config(0)
    launch = op.launch(config, wl)
    assert launch.grid[0] == -(
        -4096 // (_int(config["block_size_x"]) * _int(config["tile_size_x"]))
    )
    assert launch.grid[1] == -(
        -4096 // (_int(config["block_size_y"]) * _int(config["tile_size_y"]))
    )
    out, image = op.values
    assert out.shape == (4096 * 4096,) and image.shape == ((4096 + 15 - 1) * (4096 + 15 - 1),)
    assert set(op.constant_memory) == {"d_filter"} and op.constant_memory["d_filter"].shape == (
        225,
    )
    assert op.outputs == (0,) and op.reference(wl, op.arguments(wl, np.random.default_rng(0))) == [
        None
    ]


def test_t1_sizes_are_parsed_never_evaluated(tmp_path: Path) -> None:
    spec = json.loads((RECORDED / "convolution_t1.json").read_text())
    spec["KernelSpecification"]["Arguments"][0]["Size"] = "__import__('os').getpid()"
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(FormatError, match="is not allowed"):
        CustomOperator.from_t1(path, source="")
    spec["KernelSpecification"]["Arguments"][0]["Size"] = "ProblemSize[0] // 0"
    path.write_text(json.dumps(spec))
    with pytest.raises(FormatError, match="divides by zero"):
        CustomOperator.from_t1(path, source="")
    with pytest.raises(FormatError, match="KernelFile"):
        CustomOperator.from_t1(RECORDED / "convolution_t1.json")  # the .cu is not shipped
