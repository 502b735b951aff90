"""What produced a trial's time, as one comparable string: its fingerprint.

A trial's ``toolchain`` JSON records the versions it ran under. The facets that change a
kernel's time are the kernel template (``kernel``: a hash of its source and operator version,
stamped by the tuner) and the toolchain that built and ran it (driver, CUDA runtime or NVRTC,
C compiler and flags). The fingerprint is a short hash of exactly those facets; ktune's own
and Python's versions are not among them (they change no kernel's time). A trial without any
of them (an import, a replay) has the empty fingerprint: of unknown provenance, never stale,
never reused as a measurement.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["FACETS", "facets", "fingerprint", "kernel_of", "toolchain_changes"]

#: the toolchain keys that make a time: the kernel template first
FACETS = ("kernel", "cuda_driver", "cuda_runtime", "nvrtc", "compiler", "cflags")


def facets(toolchain: Mapping[str, Any] | None) -> dict[str, str]:
    """The facets of ``toolchain`` that change a kernel's time (absent ones left out)."""
    if not toolchain:
        return {}
    return {k: str(toolchain[k]) for k in FACETS if toolchain.get(k) not in (None, "")}


def fingerprint(toolchain: Mapping[str, Any] | None) -> str:
    """16 hex digits naming the kernel template and toolchain, or ``""`` when unknown."""
    found = facets(toolchain)
    if not found:
        return ""
    text = json.dumps(found, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def kernel_of(toolchain: Mapping[str, Any] | None) -> str:
    """The kernel template hash a trial was measured with (``""``: unknown)."""
    return str((toolchain or {}).get("kernel") or "")


def toolchain_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[str]:
    """``name old -> new`` for each toolchain facet (not the kernel) that both record and
    that differs."""
    a, b = facets(old), facets(new)
    return [f"{k} {a[k]} -> {b[k]}" for k in FACETS[1:] if k in a and k in b and a[k] != b[k]]
