"""A lookup's question: checked, and built into the workload that ``ktune tune`` would store.

A question names a workload key, or an operator with a shape (the shape grammar of every
command, :func:`ktune.search_space.workload.parse_shape`), a dtype and a layout. For ktune's
own operators (GPU and CPU) the workload is the one the operator builds, through its workload
form (:mod:`ktune.search_space.operators.forms`: no kernel, no numpy), with its default dtype
and layout for what is not given, as ``ktune tune --op`` builds it: a convolution's short
shape forms and the defaults find what tune stored. For any other operator (recorded spaces,
imports) the workload is taken as asked (no dtype is no dtype). A workload key is always taken
as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from ktune.db.lookup_records import LookupQuery
from ktune.search_space.workload import Workload, WorkloadError
from ktune.search_space.workload import parse_shape as workload_shape

if TYPE_CHECKING:
    from ktune.search_space.operators.forms import WorkloadForm

__all__ = [
    "LookupInputError",
    "Question",
    "ask",
    "own_family",
    "own_operator",
    "parse_shape",
]

_FIELDS = ("operator", "shape", "dtype", "layout")


class LookupInputError(ValueError):
    """The question is malformed: ``field`` names what is wrong (as the REST API's 422 does)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def parse_shape(shape: str | Sequence[int]) -> tuple[int, ...]:
    """The shape grammar of every command (:func:`ktune.search_space.workload.parse_shape`),
    its errors as a :class:`LookupInputError` of the field ``shape``."""
    try:
        return workload_shape(shape)
    except WorkloadError as exc:
        raise LookupInputError("shape", str(exc)) from None


def own_operator(name: str) -> WorkloadForm | None:
    """The workload form of ktune's operator called ``name`` (GPU or CPU), or None for any
    other name."""
    from ktune.search_space.operators.forms import form

    return form(name)


def own_family(operator: str, dtype: str, layout: str) -> tuple[str, str] | None:
    """(dtype, layout) with ktune's operator ``operator``'s defaults for what is not given
    (its first dtype and layout, as its workloads take them), or None for any other name."""
    op = own_operator(operator)
    if op is None:
        return None
    return dtype or op.dtypes[0], layout or op.layouts[0]


class Question(NamedTuple):
    """A checked question: the workload the lookup answers, on ``device``."""

    device: str
    query: LookupQuery


def _through(
    op: WorkloadForm, shape: tuple[int, ...], dtype: str, layout: str, device: str
) -> LookupQuery:
    from ktune.search_space.operators.forms import OperatorError

    try:
        wl = op.workload(shape, dtype or op.dtypes[0], layout)
    except (OperatorError, WorkloadError) as exc:
        message = str(exc)
        field = next((f for f in ("dtype", "layout") if f": {f} " in message), "shape")
        raise LookupInputError(field, message) from None
    return _lookup_query(wl, device)


def _lookup_query(wl: Workload, device: str) -> LookupQuery:
    return LookupQuery(wl.key, wl.operator, wl.shape, wl.dtype, wl.layout, device)


def ask(
    operator: str | None,
    shape: str | Sequence[int] | None,
    dtype: str,
    layout: str,
    device: str,
    workload: str | None,
) -> Question:
    """Check a question's fields (each error a :class:`LookupInputError` naming its field).

    ``dtype`` ``-`` is no dtype, as in a workload key."""
    if not device or not device.strip():
        raise LookupInputError("device", "give the device name, e.g. 'NVIDIA A100-PCIE-40GB'")
    for field, text in (
        ("device", device),
        ("operator", operator),
        ("workload", workload),
        ("dtype", dtype),
        ("layout", layout),
    ):
        if text is not None and "\x00" in text:
            raise LookupInputError(field, "must not contain NUL characters")
    device = device.strip()
    if workload is not None:
        if operator is not None or shape is not None or dtype not in ("", "-") or layout:
            raise LookupInputError(
                "workload", "give a workload key or operator, shape, dtype and layout, not both"
            )
        try:
            return Question(device, _lookup_query(Workload.from_key(workload), device))
        except WorkloadError as exc:
            raise LookupInputError("workload", str(exc)) from None
    if not operator:
        raise LookupInputError("operator", "give an operator (or a workload key)")
    if shape is None:
        raise LookupInputError("shape", "give the problem shape, e.g. 4096x4096")
    dims = parse_shape(shape)
    dtype = "" if dtype == "-" else dtype
    op = own_operator(operator)
    if op is not None:
        return Question(device, _through(op, dims, dtype, layout, device))
    try:
        return Question(device, _lookup_query(Workload(operator, dims, dtype, layout), device))
    except WorkloadError as exc:
        message = str(exc)
        field = next((f for f in _FIELDS if message.startswith(f)), "operator")
        raise LookupInputError(field, message) from None
