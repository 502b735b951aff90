"""How each of ktune's operators writes its workloads, without its kernels (no numpy).

A :class:`WorkloadForm` knows an operator's name, the dimensions of its shapes, its dtypes and
layouts, and the canonical form of a shape (a convolution takes 7, 9, 11 or 13 numbers and keys
11, with its padding in the layout). It also knows the operator's C entry point (its sizes,
derived sizes and pointers: :class:`~ktune.search_space.operators.entry.EntryAbi`) and its
``requirements``, the expressions a config must meet to compute a correct result at a shape.
Every operator class inherits its form, so what a form builds is what the operator builds;
:func:`form` gives one by name without importing the operator, so that a build-time lookup can
build the workload ``ktune tune`` stored, and judge whether a config tuned at another shape is
valid at the asked one, without loading numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ktune.search_space.excerpt import excerpt
from ktune.search_space.operators.entry import EntryAbi, Pointer
from ktune.search_space.workload import Workload, WorkloadError, parse_shape

__all__ = [
    "CONV_ENTRY",
    "CONV_SIZES",
    "GEMM_ENTRY",
    "CPU_DTYPES",
    "FORMS",
    "ConvForm",
    "ConvShape",
    "GemmForm",
    "OperatorError",
    "ROWS_ALIGNED",
    "WorkloadForm",
    "form",
    "shape_of",
]

#: the dtypes of the C kernels
CPU_DTYPES = ("float32", "float64")


class OperatorError(ValueError):
    """An operator cannot serve the workload or config it was given."""


def shape_of(shape: Sequence[int] | str) -> tuple[int, ...]:
    """:func:`~ktune.search_space.workload.parse_shape`, its errors as :class:`OperatorError`."""
    try:
        return parse_shape(shape)
    except WorkloadError as exc:
        raise OperatorError(str(exc)) from None


class WorkloadForm:
    """An operator's name, and the dtypes, layouts and shape dimensions its workloads may have
    (the first dtype and layout are the defaults)."""

    name: ClassVar[str]
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float16")
    layouts: ClassVar[tuple[str, ...]] = ("",)
    #: dimension names, in shape order (for messages and ``--shape`` help)
    dims: ClassVar[tuple[str, ...]] = ()
    #: the C entry point of a shipped kernel: its size arguments, derived sizes and pointers
    entry: ClassVar[EntryAbi]
    #: expressions over knobs, sizes and derived sizes that a config must satisfy to compute a
    #: correct result at a shape (alignment, not speed); every space includes them
    requirements: ClassVar[tuple[str, ...]] = ()

    @property
    def shape_form(self) -> str:
        """How a shape is written, e.g. ``MxNxK``."""
        return "x".join(self.dims)

    def workload(
        self, shape: Sequence[int] | str, dtype: str = "float32", layout: str = ""
    ) -> Workload:
        """A validated workload of this operator (``shape`` as ints or ``4096x4096``)."""
        dims = shape_of(shape)
        layout = layout or self.layouts[0]
        if dtype not in self.dtypes:
            raise OperatorError(
                f"{self.name}: dtype {excerpt(dtype)} not supported "
                f"(choose from: {', '.join(self.dtypes)})"
            )
        if layout not in self.layouts:
            raise OperatorError(
                f"{self.name}: layout {excerpt(layout)} not supported "
                f"(choose from: {', '.join(self.layouts)})"
            )
        dims = self.canonical_shape(dims)
        try:
            return Workload(self.name, dims, dtype, layout)
        except WorkloadError as e:
            raise OperatorError(str(e)) from None

    def canonical_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Check the shape's rank and values; subclasses may fill in defaults."""
        if len(shape) != len(self.dims):
            raise OperatorError(
                f"{self.name}: shape needs {len(self.dims)} dimensions ({'x'.join(self.dims)}), "
                f"got {len(shape)}"
            )
        if any(d <= 0 for d in shape):
            raise OperatorError(f"{self.name}: shape {shape} must be positive")
        return shape

    def check(self, workload: Workload) -> None:
        if workload.operator != self.name:
            raise OperatorError(f"workload {workload.key} is not a {self.name} workload")

    def entry_for(self, layout: str) -> EntryAbi:
        """The entry point of the kernels of ``layout`` (its arrays' shapes may differ)."""
        return self.entry

    def entry_sizes(self, workload: Workload) -> tuple[int, ...]:
        """The values of the entry point's sizes for ``workload``, in order (its shape)."""
        self.check(workload)
        return tuple(workload.shape)

    def sizes(self, workload: Workload) -> dict[str, int]:
        """Entry sizes and derived sizes of ``workload`` by name (empty without an entry)."""
        from ktune.search_space.operators.expressions import int_expr  # it imports this module

        entry = getattr(self, "entry", None)
        if entry is None:
            return {}
        env: dict[str, int] = dict(zip(entry.sizes, self.entry_sizes(workload)))
        for name, expression in entry.derived:
            env[name] = int_expr(expression).value(env)
        return env


#: the entry point of C = A @ B (row-major), GPU and CPU alike
GEMM_ENTRY = EntryAbi(
    ("M", "N", "K"),
    (
        Pointer("A", dims=("M", "K")),
        Pointer("B", dims=("K", "N")),
        Pointer("C", output=True, dims=("M", "N")),
    ),
)


class GemmForm(WorkloadForm):
    """C = A @ B with A of MxK and B of KxN."""

    dims = ("M", "N", "K")
    entry = GEMM_ENTRY


#: a convolution's 13 numbers, in shape order
CONV_SIZES = ("N", "C", "H", "W", "K", "R", "S", "SH", "SW", "PH", "PW", "DH", "DW")


class ConvShape:
    """The 13 numbers of a convolution (N C H W K R S SH SW PH PW DH DW) and its output size."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        #: the 13 numbers in order (an entry point's size arguments)
        self.sizes = tuple(shape)
        (
            self.n,
            self.c,
            self.h,
            self.w,
            self.k,
            self.r,
            self.s,
            self.sh,
            self.sw,
            self.ph,
            self.pw,
            self.dh,
            self.dw,
        ) = shape
        self.p = (self.h + 2 * self.ph - self.dh * (self.r - 1) - 1) // self.sh + 1
        self.q = (self.w + 2 * self.pw - self.dw * (self.s - 1) - 1) // self.sw + 1

    def defines(self, nhwc: bool) -> dict[str, int]:
        names = (*CONV_SIZES, "P", "Q")
        values = (*self.sizes, self.p, self.q)
        return {**{f"CV_{k}": v for k, v in zip(names, values)}, "CV_NHWC": int(nhwc)}

    def gemm(self, nhwc: bool) -> tuple[int, int, int]:
        """(M, N, K) of the implicit GEMM."""
        pixels, reduce = self.n * self.p * self.q, self.c * self.r * self.s
        return (pixels, self.k, reduce) if nhwc else (self.k, pixels, reduce)


#: a convolution's entry point (NCHW, weights KCRS); NHWC's arrays are permuted
CONV_ENTRY = EntryAbi(
    CONV_SIZES,
    (
        Pointer("x", dims=("N", "C", "H", "W")),
        Pointer("w", dims=("K", "C", "R", "S")),
        Pointer("y", output=True, dims=("N", "K", "P", "Q")),
    ),
    (
        ("P", "(H + 2 * PH - DH * (R - 1) - 1) // SH + 1"),
        ("Q", "(W + 2 * PW - DW * (S - 1) - 1) // SW + 1"),
    ),
    nonnegative=("PH", "PW"),
    defaults=(("SH", 1), ("SW", 1), ("PH", 0), ("PW", 0), ("DH", 1), ("DW", 1)),
)

_NHWC_ENTRY = EntryAbi(
    CONV_ENTRY.sizes,
    (
        Pointer("x", dims=("N", "H", "W", "C")),
        Pointer("w", dims=("K", "R", "S", "C")),
        Pointer("y", output=True, dims=("N", "P", "Q", "K")),
    ),
    CONV_ENTRY.derived,
    CONV_ENTRY.nonnegative,
    CONV_ENTRY.defaults,
)


class ConvForm(WorkloadForm):
    """A 2-D convolution's workloads: the canonical shape is 11 numbers (N..S, stride,
    dilation) with the padding in the layout (``NCHW_pad1x1``)."""

    layouts: ClassVar[tuple[str, ...]] = ("NCHW", "NHWC")
    dims: ClassVar[tuple[str, ...]] = ("N", "C", "H", "W", "K", "R", "S", "SH", "SW", "DH", "DW")
    entry = CONV_ENTRY

    def entry_for(self, layout: str) -> EntryAbi:
        return _NHWC_ENTRY if layout.startswith("NHWC") else CONV_ENTRY

    def entry_sizes(self, workload: Workload) -> tuple[int, ...]:
        """The 13 numbers, the padding from the layout."""
        cs, _ = self.conv_shape(workload)
        return cs.sizes

    def conv_shape(self, workload: Workload) -> tuple[ConvShape, bool]:
        """The workload's 13 numbers, and whether its layout is NHWC."""
        self.check(workload)
        base, _, pad = workload.layout.partition("_pad")
        if base not in self.layouts or len(workload.shape) != 11:
            raise OperatorError(f"{workload.key} is not a canonical {self.name} workload")
        ph, pw = (int(v) for v in pad.split("x")) if pad else (0, 0)
        s = workload.shape
        return ConvShape(s[:9] + (ph, pw) + s[9:]), base == "NHWC"

    @property
    def shape_form(self) -> str:
        return "NxCxHxWxKxRxS[xSHxSW[xPHxPW[xDHxDW]]]"

    def workload(
        self, shape: Sequence[int] | str, dtype: str = "float32", layout: str = ""
    ) -> Workload:
        """Accepts 7 numbers (N..S), 9 (+ stride), 13 (+ padding, dilation) or the canonical 11
        (N..S, stride, dilation; padding from a layout like ``NCHW_pad1x1``)."""
        dims = shape_of(shape)
        base, _, pad = (layout or "NCHW").partition("_pad")
        ph = pw = 0
        if pad:
            try:
                ph, pw = (int(v) for v in pad.split("x"))
            except ValueError:
                raise OperatorError(
                    f"{self.name}: layout {excerpt(layout)} is not like NCHW_pad1x1"
                ) from None
        if len(dims) == 13:
            if pad:
                raise OperatorError(
                    f"{self.name}: padding given both in the shape and in the layout"
                )
            full = dims
        elif len(dims) == 11:
            full = dims[:9] + (ph, pw) + dims[9:]
        elif len(dims) in (7, 9):
            full = dims + (1, 1)[: 9 - len(dims)] + (ph, pw, 1, 1)
        else:
            raise OperatorError(
                f"{self.name}: shape is NxCxHxWxKxRxS, "
                "optionally followed by stride SHxSW, then padding "
                f"PHxPW and dilation DHxDW; got {len(dims)} numbers"
            )
        full = self.full_shape(full)
        suffix = f"_pad{full[9]}x{full[10]}" if full[9] or full[10] else ""
        wl = super().workload(full[:9] + full[11:], dtype, base)
        return Workload(wl.operator, wl.shape, wl.dtype, base + suffix)

    def full_shape(self, full: tuple[int, ...]) -> tuple[int, ...]:
        """Check the 13 numbers of a convolution."""
        if any(d <= 0 for i, d in enumerate(full) if i not in (9, 10)) or min(full[9:11]) < 0:
            raise OperatorError(f"{self.name}: shape {full} has a zero or negative size")
        cs = ConvShape(full)
        if cs.p <= 0 or cs.q <= 0:
            raise OperatorError(
                f"{self.name}: the filter does not fit the padded input (output {cs.p}x{cs.q})"
            )
        return full


# --- the forms of ktune's registered operators (each operator class inherits its own)


#: vector loads and stores of a row need the row's length to be a multiple of their width
ROWS_ALIGNED = "COLS % vector_width == 0"


class MatmulForm(GemmForm):
    name = "matmul"
    requirements = ("K % vector_width == 0 and N % vector_width == 0",)


class Conv2dForm(ConvForm):
    name = "conv2d"


class ReductionForm(WorkloadForm):
    name = "reduction"
    layouts = ("sum", "max")
    dims = ("ROWS", "COLS")
    entry = EntryAbi(
        ("ROWS", "COLS"),
        (
            Pointer("x", dims=("ROWS", "COLS")),
            Pointer("out", output=True, dims=("ROWS",), dtype="float32"),
        ),
    )
    requirements = (ROWS_ALIGNED,)


class SoftmaxForm(WorkloadForm):
    name = "softmax"
    dims = ("ROWS", "COLS")
    entry = EntryAbi(
        ("ROWS", "COLS"),
        (Pointer("x", dims=("ROWS", "COLS")), Pointer("y", output=True, dims=("ROWS", "COLS"))),
    )
    requirements = (ROWS_ALIGNED,)


class TransposeForm(WorkloadForm):
    name = "transpose"
    dims = ("ROWS", "COLS")
    entry = EntryAbi(
        ("ROWS", "COLS"),
        (Pointer("x", dims=("ROWS", "COLS")), Pointer("y", output=True, dims=("COLS", "ROWS"))),
    )
    requirements = ("COLS % vector_width == 0 and ROWS % vector_width == 0",)


class CpuMatmulForm(GemmForm):
    name = "cpu_matmul"
    dtypes = CPU_DTYPES


class CpuConv2dForm(ConvForm):
    name = "cpu_conv2d"
    dtypes = CPU_DTYPES
    layouts = ("NCHW",)


#: the form of each registered operator (GPU and CPU), by name
FORMS: dict[str, type[WorkloadForm]] = {
    f.name: f
    for f in (
        MatmulForm,
        Conv2dForm,
        ReductionForm,
        SoftmaxForm,
        TransposeForm,
        CpuMatmulForm,
        CpuConv2dForm,
    )
}


def form(name: str) -> WorkloadForm | None:
    """The workload form of ktune's operator ``name`` (GPU or CPU), or None for any other name."""
    found = FORMS.get(name)
    return None if found is None else found()
