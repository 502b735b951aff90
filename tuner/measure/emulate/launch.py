"""Launching an emulated kernel: its arguments in aligned buffers, the grid run, errors back.

Arguments are given as a GPU launch takes them: arrays (copied into buffers aligned to 256
bytes, as ``cudaMalloc`` aligns, and registered with the runtime under their names, outputs
writable, inputs not) and scalars (numpy scalars, packed into 8-byte slots as their C types).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ktune.search_space.operators.base import Launch
from ktune.tuner.measure.emulate.build import EmulatedKernel

__all__ = ["LaunchError", "Library", "run"]

#: memory accesses one launch may make before it counts as hung
DEFAULT_STEP_LIMIT = 2_000_000_000
_ALIGN = 256


class LaunchError(RuntimeError):
    """The emulated launch stopped: a bounds, race or barrier error, or a hang."""


@dataclass
class Library:
    """A loaded kernel library (its runtime state is its own)."""

    kernel: EmulatedKernel
    dll: Any

    @classmethod
    def load(cls, kernel: EmulatedKernel) -> Library:
        dll = ctypes.CDLL(str(kernel.library))
        dll.kt_add_buffer.argtypes = [
            ctypes.c_void_p,
            ctypes.c_ulong,
            ctypes.c_int,
            ctypes.c_char_p,
        ]
        dll.kt_add_shared_array.argtypes = [ctypes.c_ulong, ctypes.c_ulong, ctypes.c_char_p]
        dll.kt_static_shared_bytes.restype = ctypes.c_ulong
        dll.kt_launch.argtypes = [ctypes.c_uint] * 6 + [
            ctypes.c_ulong,
            ctypes.POINTER(ctypes.c_ulonglong),
            ctypes.c_int,
            ctypes.c_ulonglong,
            ctypes.c_int,
        ]
        dll.kt_error.restype = ctypes.c_char_p
        return cls(kernel, dll)

    @property
    def arity(self) -> int:
        return int(self.dll.kt_entry_arity())

    @property
    def launch_bounds(self) -> int:
        """The kernel's ``__launch_bounds__`` max threads per block (0: none)."""
        return int(self.dll.kt_entry_launch_bounds())


_LOADED: dict[str, Library] = {}


def library(kernel: EmulatedKernel) -> Library:
    """The loaded library of ``kernel`` (loaded once per process)."""
    key = str(kernel.library)
    if key not in _LOADED:
        _LOADED[key] = Library.load(kernel)
    return _LOADED[key]


def _aligned_copy(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, view): ``a``'s contents in memory aligned to 256 bytes."""
    a = np.ascontiguousarray(a)
    owner = np.empty(a.nbytes + _ALIGN, dtype=np.uint8)
    start = (-owner.ctypes.data) % _ALIGN
    view = owner[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return owner, view


def _slot(value: Any) -> int:
    """A scalar argument as the bits of its 8-byte slot (little-endian, its own C type)."""
    scalar = np.asarray(value)
    if scalar.dtype.kind not in "iufb" or scalar.ndim:
        raise LaunchError(f"kernel argument {value!r} is neither an array nor a number")
    raw = scalar.tobytes().ljust(8, b"\0")
    return int.from_bytes(raw, "little")


def run(
    kernel: EmulatedKernel,
    launch: Launch,
    values: Sequence[Any],
    outputs: Sequence[int],
    names: Sequence[str] = (),
    *,
    step_limit: int = DEFAULT_STEP_LIMIT,
    reverse: bool = False,
) -> list[np.ndarray]:
    """Run ``kernel`` with ``values`` and return the arrays at ``outputs`` after the launch.

    ``reverse`` runs each block's threads in descending order (a schedule that a missed
    barrier may answer differently to). Raises :class:`LaunchError` with the runtime's message.
    """
    lib = library(kernel)
    if lib.arity != len(values):
        raise LaunchError(f"kernel {kernel.name} takes {lib.arity} arguments, given {len(values)}")
    threads = launch.threads_per_block
    if lib.launch_bounds and threads > lib.launch_bounds:
        raise LaunchError(
            f"a block of {threads} threads exceeds the kernel's __launch_bounds__"
            f"({lib.launch_bounds}): a GPU refuses the launch"
        )
    if not (
        1 <= launch.grid[0] < 2**31
        and 1 <= launch.grid[1] <= 65535
        and 1 <= launch.grid[2] <= 65535
    ):
        raise LaunchError(f"grid {launch.grid} is outside a GPU's limits")
    dll = lib.dll
    dll.kt_reset()
    for array in kernel.shared:
        dll.kt_add_shared_array(array.offset, array.size, array.name.encode())
    keep: list[np.ndarray] = []
    views: dict[int, np.ndarray] = {}
    slots = []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray):
            owner, view = _aligned_copy(v)
            keep.append(owner)
            views[i] = view
            name = names[i] if i < len(names) else f"argument {i}"
            if dll.kt_add_buffer(view.ctypes.data, view.nbytes, int(i in outputs), name.encode()):
                raise LaunchError("too many array arguments for the emulation (16 at most)")
            slots.append(view.ctypes.data)
        else:
            slots.append(_slot(v))
    packed = (ctypes.c_ulonglong * max(len(slots), 1))(*slots)
    failed = dll.kt_launch(
        *launch.grid,
        *launch.block,
        launch.shared_mem,
        packed,
        len(slots),
        step_limit,
        int(reverse),
    )
    if failed:
        raise LaunchError(dll.kt_error().decode(errors="replace"))
    return [views[i].copy() for i in outputs]
