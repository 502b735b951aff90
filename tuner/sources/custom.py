"""A user's own kernel, built from a job's :class:`CustomOptions` (and Python callables).

What a custom job stores is enough to build its kernel again on any machine that runs it: the
T1 spec (a file, or the document inline), the kernel's source (the spec's ``KernelFile``, or
inline), and, from ``ktune.tune``, a ``.npz`` file of the arguments' values and answers
(:func:`save_arrays`, pinned by digest). Restrictions and a ``verify`` given as Python
callables (:class:`KernelHooks`) cannot be stored: the job notes that it had them, and only a
caller that passes them again (``ktune.tune(..., resume=JOB)``) may resume it.

The T1 document may hold a ``ktune`` object of ktune's own: ``atol`` (the answer's absolute
tolerance) and ``flops`` (per run, for reports).
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ktune.search_space.formats import FormatError, T1Spec, load_t1
from ktune.search_space.formats.t1 import spec_from_dict
from ktune.search_space.operators.cpu.custom import CustomCpuOperator, Verify
from ktune.search_space.operators.custom import CustomOperator, t1_kernel_source
from ktune.search_space.parameters import Config
from ktune.search_space.predicates import Predicate
from ktune.tuner.sources.base import SourceError
from ktune.tuner.sources.options import CustomOptions

__all__ = ["KernelHooks", "custom_operator", "kernel_language", "load_spec", "save_arrays"]


@dataclass(frozen=True)
class KernelHooks:
    """What a Python caller gives as functions: ``restrictions`` (config -> valid?) and
    ``verify`` (Kernel Tuner's ``verify(answer, outputs, atol) -> bool``)."""

    restrictions: tuple[Predicate, ...] = ()
    verify: Verify | None = None
    #: (config, time ms) -> the value the search optimises instead of the time
    objective: Callable[[Config, float], float] | None = None
    higher_is_better: bool = False

    def names(self) -> tuple[str, ...]:
        """The parts given, as a job's options note them."""
        return tuple(
            name
            for name, given in (("restrictions", self.restrictions), ("verify", self.verify))
            if given
        )


def load_spec(options: CustomOptions) -> tuple[T1Spec, str, str]:
    """The T1 spec of ``options``, its kernel's source, and where it came from (for errors);
    a :class:`FormatError` when either cannot be read."""
    if options.t1 is not None:
        spec = load_t1(options.t1)
        source = options.source or t1_kernel_source(spec, options.t1)
        return spec, source, str(options.t1)
    assert options.document is not None and options.source is not None  # checked when built
    return (
        spec_from_dict(dict(options.document), source="the kernel's spec"),
        options.source,
        "spec",
    )


def kernel_language(spec: T1Spec, kernel_file: str | None = None) -> str:
    """``c`` or ``cuda``: the spec's ``KernelSpecification.Language`` (Kernel Tuner writes
    ``CUDA``; ``C`` for a C kernel), else the kernel file's suffix (``.c``), else CUDA."""
    kernel = spec.raw.get("KernelSpecification", {})
    language = kernel.get("Language") if isinstance(kernel, dict) else None
    if isinstance(language, str) and language.strip():
        named = language.strip().lower()
        if named not in ("c", "cuda"):
            raise FormatError(
                f"KernelSpecification.Language {language!r}: ktune tunes C and CUDA kernels"
            )
        return named
    if kernel_file is not None and kernel_file.endswith(".c"):
        return "c"
    return "cuda"


def custom_operator(
    options: CustomOptions, hooks: KernelHooks | None = None
) -> CustomOperator | CustomCpuOperator:
    """The kernel ``options`` describe (C: a CPU operator), with ``hooks``' callables; a
    :class:`SourceError` naming what is wrong (including a job whose callables are missing)."""
    hooks = hooks or KernelHooks()
    missing = [name for name in options.python if name not in hooks.names()]
    if missing:
        raise SourceError(
            f"the kernel was tuned with Python callables ({', '.join(missing)}), which a job "
            "cannot store: resume it with ktune.tune(..., resume=JOB) and the same callables"
        )
    try:
        spec, source, where = load_spec(options)
        values, answer = _arrays(options)
        extra = spec.raw.get("ktune", {}) if isinstance(spec.raw.get("ktune"), dict) else {}
        kernel = CustomOperator.from_spec(spec, source, where=where, values=values, answer=answer)
    except (FormatError, OSError) as exc:
        raise SourceError(str(exc)) from None
    kernel.atol = float(extra.get("atol", kernel.atol))
    kernel._flops = float(extra.get("flops", 0.0))
    if options.language == "c":
        try:
            return CustomCpuOperator(kernel, predicates=hooks.restrictions, verify=hooks.verify)
        except ValueError as exc:
            raise SourceError(str(exc)) from None
    if hooks.verify is not None:
        raise SourceError("verify is for C kernels; give a CUDA kernel's answer (and atol)")
    kernel.predicates = hooks.restrictions
    return kernel


def save_arrays(
    directory: Path, values: Sequence[Any], answer: Sequence[Any] | None
) -> tuple[Path, str]:
    """Write the arguments' ``values`` (and the ``answer``'s arrays) to a ``.npz`` file in
    ``directory`` named by its digest; its path and digest."""
    buffer = io.BytesIO()
    arrays = {f"arg{i}": np.asarray(v) for i, v in enumerate(values)}
    for i, a in enumerate(answer or ()):
        if a is not None:
            arrays[f"answer{i}"] = np.asarray(a)
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{digest[:24]}.npz"
    if not path.exists():
        fd, partial = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(partial, path)
    return path, digest


def _arrays(options: CustomOptions) -> tuple[list[Any] | None, list[Any] | None]:
    """The argument values and answer of ``options.arrays`` (checked against its digest)."""
    if options.arrays is None:
        return None, None
    try:
        data = options.arrays.read_bytes()
    except OSError:
        raise SourceError(f"{options.arrays}: the kernel's arguments are gone") from None
    if options.arrays_digest and hashlib.sha256(data).hexdigest() != options.arrays_digest:
        raise SourceError(f"{options.arrays}: the kernel's arguments changed since the job began")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        count = sum(1 for k in npz.files if k.startswith("arg"))
        values = [_value(npz[f"arg{i}"]) for i in range(count)]
        answer = [npz[f"answer{i}"] if f"answer{i}" in npz.files else None for i in range(count)]
    return values, answer if any(a is not None for a in answer) else None


def _value(array: np.ndarray) -> Any:
    """A stored argument: a 0-d array is the scalar it was (``np.int32(n)``)."""
    return array[()] if array.ndim == 0 else array
