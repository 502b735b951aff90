"""The one shape grammar every command and the REST API read, and workload keys."""

from __future__ import annotations

import numpy as np
import pytest

from ktune.search_space.operators import get
from ktune.search_space.operators.cpu import get as get_cpu
from ktune.search_space.workload import MAX_DIM, MAX_RANK, WorkloadError, parse_shape


@pytest.mark.parametrize(
    ("text", "dims"),
    [
        ("4096x4096", (4096, 4096)),
        ("4096,4096", (4096, 4096)),
        (" 64 x 32 , 16 ", (64, 32, 16)),
        ("64X32", (64, 32)),
        ("7", (7,)),
        ("1x16x16x16x16x3x3x1x1x0x0x1x1", (1, 16, 16, 16, 16, 3, 3, 1, 1, 0, 0, 1, 1)),
    ],
)
def test_text_shapes_are_sizes_joined_by_x_or_comma(text: str, dims: tuple[int, ...]) -> None:
    assert parse_shape(text) == dims


def test_sequences_are_taken_as_they_are() -> None:
    assert parse_shape([64, 32]) == (64, 32)
    assert parse_shape(np.array([64, 32])) == (64, 32)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "x",
        "64x",
        "64xx32",
        "64x-1",
        "64x1.5",
        "6²",
        "٣x3",
        "a,b",
        "9" * 30,
        [64, True],
        ["64"],
        [-1],
    ],
)
def test_anything_else_is_one_error_that_quotes_the_shape(bad: object) -> None:
    with pytest.raises(WorkloadError, match="shape"):
        parse_shape(bad)  # type: ignore[arg-type]


def test_rank_and_size_limits() -> None:
    assert len(parse_shape("x".join(["1"] * MAX_RANK))) == MAX_RANK
    with pytest.raises(WorkloadError, match=f"1 to {MAX_RANK}"):
        parse_shape("x".join(["1"] * (MAX_RANK + 1)))
    assert parse_shape(str(MAX_DIM)) == (MAX_DIM,)
    with pytest.raises(WorkloadError, match="at most"):
        parse_shape(str(MAX_DIM + 1))


@pytest.mark.parametrize("operator", [get("matmul"), get_cpu("cpu_matmul")])
def test_gpu_and_cpu_operators_read_the_same_grammar(operator: object) -> None:
    by_x = operator.workload("128x64x32")  # type: ignore[attr-defined]
    assert operator.workload("128, 64, 32") == by_x  # type: ignore[attr-defined]
    assert operator.workload((128, 64, 32)) == by_x  # type: ignore[attr-defined]


def test_each_operator_inherits_the_workload_form_a_lookup_builds_with() -> None:
    """The forms are known without the kernels; an operator is its form, so both build alike."""
    from ktune.search_space import operators
    from ktune.search_space.operators import cpu
    from ktune.search_space.operators.forms import FORMS, form

    assert sorted(FORMS) == sorted([*operators.names(), *cpu.names()])
    for name in FORMS:
        op = cpu.get(name) if name in cpu.names() else operators.get(name)
        light = form(name)
        assert isinstance(op, FORMS[name]) and light is not None
        assert (light.dtypes, light.layouts, light.dims) == (op.dtypes, op.layouts, op.dims)
        # what a lookup judges a config by (no numpy): the same rules the kernels obey
        assert (light.entry, light.requirements) == (op.entry, op.requirements)
        for layout in op.layouts:
            assert light.entry_for(layout) == op.entry_for(layout)
    assert form("convolution_kernel") is None
    conv = operators.get("conv2d").workload("2x3x9x9x4x3x3", layout="NHWC_pad1x1")
    assert form("conv2d").sizes(conv) == operators.get("conv2d").sizes(conv)  # type: ignore[union-attr]
    assert form("conv2d").sizes(conv)["P"] == 9  # type: ignore[union-attr]
    assert form("matmul").requirements == ("K % vector_width == 0 and N % vector_width == 0",)  # type: ignore[union-attr]
