"""Python access to a ``ktune build`` directory, without a compiler: ``ktune.kernels.load``.

``load(DIR)`` reads ``DIR/manifest.json``, opens ``DIR/lib/libktune_kernels.so`` with
:mod:`ctypes` and returns a :class:`Kernels` mapping each entry point's name (without the
``ktune_`` prefix, e.g. ``cpu_matmul_float32``) to a callable:

* CPU entry points take numpy arrays, C-contiguous, of the entry's dtype, in the entry's order
  (``A, B`` for a matmul); the output may be passed (``out=``) or is allocated; sizes come from
  the arrays' shapes, and sizes no array has (a convolution's stride, padding, dilation) are
  keywords with the defaults the manifest names. The result is the output array.
* GPU entry points take objects with ``__cuda_array_interface__`` (CuPy, PyTorch, Numba) for
  every argument, outputs included, and ``stream=`` (an int handle, or an object with ``.ptr``
  or ``.cuda_stream``; default 0). They return the output object.

A non-zero code from the library is a :class:`KernelError`; a wrong argument (shape, dtype,
layout) a ``ValueError`` naming it, raised before the library is called.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EntryPoint", "KernelError", "Kernels", "load"]

_NUMPY_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16"}
_TYPESTR = {"float32": "<f4", "float64": "<f8", "float16": "<f2"}


class KernelError(RuntimeError):
    """A shipped kernel returned a non-zero code."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(f"{name} returned {code}")
        self.code = code


@dataclass(frozen=True)
class _Pointer:
    name: str
    output: bool
    dims: tuple[str, ...]
    dtype: str


class EntryPoint:
    """One entry point of a build, callable (see the module doc)."""

    def __init__(self, function: Any, spec: Mapping[str, Any]) -> None:
        self.name: str = spec["name"]
        self.dtype: str = spec["dtype"]
        self.gpu: bool = bool(spec["gpu"])
        self.sizes: tuple[str, ...] = tuple(spec["sizes"])
        self.derived: tuple[tuple[str, str], ...] = tuple((d[0], d[1]) for d in spec["derived"])
        self.defaults: dict[str, int] = dict(spec.get("defaults", {}))
        self.pointers = tuple(
            _Pointer(p["name"], bool(p["output"]), tuple(p["dims"]), p.get("dtype") or self.dtype)
            for p in spec["pointers"]
        )
        self.manifest = spec
        self._inputs = tuple(p for p in self.pointers if not p.output)
        self._outputs = tuple(p for p in self.pointers if p.output)
        self._size_names = frozenset(self.sizes)
        self._function = function
        function.restype = ctypes.c_int
        head = [ctypes.c_void_p] if self.gpu else []
        function.argtypes = (
            head + [ctypes.c_int64] * len(self.sizes) + [ctypes.c_void_p] * len(self.pointers)
        )

    def __repr__(self) -> str:
        args = ", ".join(p.name for p in self.pointers if not p.output)
        return f"<ktune kernel {self.name}({args}) {'GPU' if self.gpu else 'CPU'}>"

    def __call__(self, *arrays: Any, out: Any = None, stream: Any = 0, **sizes: int) -> Any:
        inputs, outputs = self._inputs, self._outputs
        if len(arrays) != len(inputs):
            names = ", ".join(p.name for p in inputs)
            raise ValueError(f"{self.name} takes {len(inputs)} arrays ({names}), got {len(arrays)}")
        unknown = sizes.keys() - self._size_names if sizes else ()
        if unknown:
            raise ValueError(f"{self.name}: no size named {', '.join(sorted(unknown))}")
        known = self._sizes(zip(inputs, arrays), sizes)
        if self.gpu:
            return self._call_gpu(arrays, out, stream, known, inputs, outputs)
        return self._call_cpu(arrays, out, known, inputs, outputs)

    # --- sizes

    def _sizes(
        self, pairs: Iterator[tuple[_Pointer, Any]], given: Mapping[str, int]
    ) -> dict[str, int]:
        known: dict[str, int] = {k: _positive_int(self.name, k, v) for k, v in given.items()}
        sizes = self._size_names
        for pointer, array in pairs:
            shape = _shape_of(array)
            if len(shape) != len(pointer.dims):
                raise ValueError(
                    f"{self.name}: {pointer.name} must have {len(pointer.dims)} dimensions "
                    f"({' x '.join(pointer.dims)}), got shape {shape}"
                )
            for dim, extent in zip(pointer.dims, shape):
                if dim in sizes:
                    if known.setdefault(dim, extent) != extent:
                        raise ValueError(
                            f"{self.name}: {pointer.name} has {dim} = {extent}, but {dim} = "
                            f"{known[dim]} elsewhere"
                        )
        for name, value in self.defaults.items():
            known.setdefault(name, value)
        if len(known) < len(sizes):
            missing = [s for s in self.sizes if s not in known]
            raise ValueError(f"{self.name}: give {', '.join(missing)} (not in any array's shape)")
        if self.derived:
            self._derive(known)
        return known

    def _derive(self, known: dict[str, int]) -> None:
        from ktune.search_space.operators.expressions import int_expr
        from ktune.search_space.operators.forms import OperatorError

        for name, expression in self.derived:
            try:
                known[name] = int_expr(expression).value(known)
            except OperatorError as exc:
                raise ValueError(f"{self.name}: cannot derive {name}: {exc}") from None
            if known[name] <= 0:
                raise ValueError(f"{self.name}: these sizes give {name} = {known[name]}")

    def _expected(self, pointer: _Pointer, known: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(known[d] for d in pointer.dims)

    # --- calls

    def _call_cpu(
        self,
        arrays: Sequence[Any],
        out: Any,
        known: dict[str, int],
        inputs: Sequence[_Pointer],
        outputs: Sequence[_Pointer],
    ) -> Any:
        import numpy as np

        for pointer, array in zip(inputs, arrays):
            dtype = np.dtype(_NUMPY_DTYPES[pointer.dtype])
            if not isinstance(array, np.ndarray) or array.dtype != dtype:
                got = getattr(array, "dtype", type(array).__name__)
                raise ValueError(
                    f"{self.name}: {pointer.name} must be a {dtype} numpy array, got {got}"
                )
            if not array.flags.c_contiguous:
                raise ValueError(f"{self.name}: {pointer.name} must be C-contiguous")
            if self._expected(pointer, known) != array.shape:
                raise ValueError(f"{self.name}: {pointer.name} has shape {array.shape}")
        if len(outputs) != 1 and out is None:
            raise ValueError(f"{self.name}: pass out= (a tuple of {len(outputs)} arrays)")
        results = list(out) if isinstance(out, (tuple, list)) else [out]
        for i, pointer in enumerate(outputs):
            dtype = np.dtype(_NUMPY_DTYPES[pointer.dtype])
            expected = self._expected(pointer, known)
            if results[i] is None:
                results[i] = np.empty(expected, dtype=dtype)
            elif not (
                isinstance(results[i], np.ndarray)
                and results[i].dtype == dtype
                and results[i].shape == expected
                and results[i].flags.c_contiguous
                and results[i].flags.writeable
            ):
                raise ValueError(
                    f"{self.name}: out must be a writable C-contiguous {dtype} array of shape "
                    f"{expected}"
                )
        by_name = dict(zip((p.name for p in inputs), arrays)) | dict(
            zip((p.name for p in outputs), results)
        )
        pointers = [by_name[p.name].ctypes.data for p in self.pointers]
        code = self._function(*(known[s] for s in self.sizes), *pointers)
        if code != 0:
            raise KernelError(self.name, code)
        return results[0] if len(results) == 1 else tuple(results)

    def _call_gpu(
        self,
        arrays: Sequence[Any],
        out: Any,
        stream: Any,
        known: dict[str, int],
        inputs: Sequence[_Pointer],
        outputs: Sequence[_Pointer],
    ) -> Any:
        if out is None:
            raise ValueError(f"{self.name}: pass out= (device arrays for the outputs)")
        results = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(results) != len(outputs):
            raise ValueError(f"{self.name}: out= needs {len(outputs)} arrays")
        pairs = list(zip(inputs, arrays)) + list(zip(outputs, results))
        by_name = {}
        for pointer, array in pairs:
            face = _interface(self.name, pointer.name, array)
            if face["typestr"] != _TYPESTR[pointer.dtype]:
                raise ValueError(
                    f"{self.name}: {pointer.name} is {face['typestr']}, not {pointer.dtype}"
                )
            if tuple(face["shape"]) != self._expected(pointer, known):
                raise ValueError(f"{self.name}: {pointer.name} has shape {tuple(face['shape'])}")
            if face.get("strides") is not None and not _c_contiguous(face, pointer.dtype):
                raise ValueError(f"{self.name}: {pointer.name} must be C-contiguous")
            by_name[pointer.name] = int(face["data"][0])
        code = self._function(
            _stream_handle(stream),
            *(known[s] for s in self.sizes),
            *(by_name[p.name] for p in self.pointers),
        )
        if code != 0:
            raise KernelError(self.name, code)
        return results[0] if len(results) == 1 else tuple(results)


def _positive_int(entry: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{entry}: {name} must be an int, got {value!r}")
    return value


def _shape_of(array: Any) -> tuple[int, ...]:
    shape = getattr(array, "shape", None)
    if shape is None:
        face = getattr(array, "__cuda_array_interface__", None)
        if face is None:
            raise ValueError(f"expected an array, got {type(array).__name__}")
        shape = face["shape"]
    return tuple(int(d) for d in shape)


def _interface(entry: str, name: str, array: Any) -> dict[str, Any]:
    face = getattr(array, "__cuda_array_interface__", None)
    if not isinstance(face, dict):
        raise ValueError(f"{entry}: {name} must be a device array (__cuda_array_interface__)")
    return face


def _c_contiguous(face: Mapping[str, Any], dtype: str) -> bool:
    item = int(_TYPESTR[dtype][-1])
    expected, step = [], item
    for extent in reversed(face["shape"]):
        expected.append(step)
        step *= int(extent)
    return tuple(face["strides"]) == tuple(reversed(expected))


def _stream_handle(stream: Any) -> int:
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attribute in ("ptr", "cuda_stream", "handle"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    raise ValueError(f"stream must be an int handle or have .ptr/.cuda_stream, got {stream!r}")


class Kernels(Mapping[str, EntryPoint]):
    """The entry points of a build by name (``cpu_matmul_float32``), also as attributes."""

    def __init__(self, directory: Path, manifest: Mapping[str, Any], library: Any) -> None:
        self.directory = directory
        self.manifest = manifest
        self.library = library
        self._entries = {
            e["name"].removeprefix("ktune_"): EntryPoint(getattr(library, e["name"]), e)
            for e in manifest["entries"]
        }

    def __getitem__(self, name: str) -> EntryPoint:
        return self._entries[name.removeprefix("ktune_")]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getattr__(self, name: str) -> EntryPoint:
        try:
            return self._entries[name]
        except KeyError:
            raise AttributeError(name) from None

    def variant(self, name: str, **sizes: int) -> int:
        """Index (in the manifest) of the variant a call of ``name`` with ``sizes`` runs."""
        entry = self[name]
        values = (ctypes.c_int64 * len(entry.sizes))(*(sizes[s] for s in entry.sizes))
        function = getattr(self.library, f"{entry.name}_variant")
        function.restype = ctypes.c_int
        return int(function(values))


def load(directory: str | Path) -> Kernels:
    """The entry points of the ``ktune build`` output ``directory``; a ``ValueError`` when it
    is not one (no manifest, or a library that does not load)."""
    root = Path(directory).expanduser()
    manifest_path = root / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{root} is not a ktune build (manifest.json: {exc})") from None
    shared = root / manifest.get("libraries", {}).get("shared", "lib/libktune_kernels.so")
    try:
        library = ctypes.CDLL(str(shared))
    except OSError as exc:
        raise ValueError(f"cannot load {shared}: {exc}") from None
    return Kernels(root, manifest, library)
