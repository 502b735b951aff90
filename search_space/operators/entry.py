"""How a shipped kernel is called: the C entry point of an operator (see ``ktune build``).

An :class:`EntryAbi` names an entry point's size arguments (``int64_t`` each, in order), the
sizes derived from them (expressions in the constraint language, e.g. a convolution's output
height), and its data pointers in order (inputs ``const``, outputs written). An operator's
``requirements`` are constraint expressions over its knobs and these sizes that a config must
satisfy to compute a correct result at a shape (alignment, not speed): the build's dispatch
serves a call only with a variant whose requirements hold at the called sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EntryAbi", "Pointer"]


@dataclass(frozen=True)
class Pointer:
    """A data argument of an entry point: its name, whether the kernel writes it, its shape
    in the entry's size names (C order), e.g. ``("M", "K")``, and its dtype when it is not the
    entry's (a reduction of fp16 into float32)."""

    name: str
    output: bool = False
    dims: tuple[str, ...] = ()
    dtype: str = ""


@dataclass(frozen=True)
class EntryAbi:
    """An entry point's size arguments, derived sizes and pointers.

    ``sizes``: C parameter names in call order (``int64_t``), e.g. ``("M", "N", "K")``.
    ``derived``: ``(name, expression)`` pairs, each over ``sizes`` and earlier derived names,
    in the constraint language (``//`` is floor division; sizes are positive).
    ``pointers``: the data arguments after the sizes, in order.
    ``nonnegative``: the sizes that may be 0 (padding); every other size and every derived size
    must be positive for a call to be valid.
    ``defaults``: values of the sizes that a caller may leave out (strides of 1, no padding), so
    that a loader can take the rest from its arrays' shapes.
    """

    sizes: tuple[str, ...]
    pointers: tuple[Pointer, ...]
    derived: tuple[tuple[str, str], ...] = ()
    nonnegative: tuple[str, ...] = ()
    defaults: tuple[tuple[str, int], ...] = ()

    def valid_sizes(self) -> list[str]:
        """The conditions (constraint language) every call's sizes must meet."""
        return [
            f"{name} >= 0" if name in self.nonnegative else f"{name} > 0"
            for name in (*self.sizes, *(d for d, _ in self.derived))
        ]
