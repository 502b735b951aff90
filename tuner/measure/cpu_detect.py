"""What the local CPU is: the spec dict the ``cpu`` backend stores with its device.

Read from ``/proc/cpuinfo`` and ``/sys/devices/system/cpu`` (Linux); where those are missing
the fields fall back to :mod:`platform` and ``os.cpu_count()``. The device is named after the
CPU model and the cores this process may use (``AMD EPYC 7763 64-Core Processor (8 cores)``),
because a CPU kernel's best config depends on both: two VMs of one model with different core
counts are different devices to the log.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

__all__ = ["cpu_spec"]

_CPUINFO = Path("/proc/cpuinfo")
_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}
# widest vector extension -> (bytes per vector register, number of vector registers)
_VECTORS = (
    ("avx512f", 64, 32),
    ("avx2", 32, 16),
    ("avx", 32, 16),
    ("sse2", 16, 16),
    ("asimd", 16, 32),
)


def cpu_spec(cpuinfo: str | None = None, caches: Path | None = None) -> dict[str, Any]:
    """The local CPU: name, vendor, architecture, cores, vector width and registers, caches."""
    info = _fields(cpuinfo if cpuinfo is not None else _read(_CPUINFO))
    cores = _cores()
    model = (
        info.get("model name")
        or info.get("Model")
        or platform.processor()
        or platform.machine()
        or "unknown CPU"
    )
    flags = set((info.get("flags") or info.get("Features") or "").split())
    vector_bytes, registers = next(((b, r) for flag, b, r in _VECTORS if flag in flags), (16, 16))
    spec: dict[str, Any] = {
        "name": f"{' '.join(model.split())} ({cores} cores)",
        "kind": "cpu",
        "vendor": _VENDORS.get(
            info.get("vendor_id", ""), info.get("vendor_id") or platform.machine()
        ),
        "architecture": platform.machine(),
        "cores": cores,
        "vector_bytes": vector_bytes,
        "vector_registers": registers,
    }
    spec.update(_cache_sizes(caches if caches is not None else _CACHES))
    return spec


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _fields(text: str) -> dict[str, str]:
    """The first processor's ``key : value`` lines."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() and fields:
            break
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cache_sizes(root: Path) -> dict[str, int]:
    """``l1d_bytes``, ``l2_bytes`` and ``l3_bytes`` of cpu0 (absent when unknown)."""
    sizes: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        level, kind, size = (_read(index / f).strip() for f in ("level", "type", "size"))
        if kind == "Instruction" or not level.isdigit():
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", size)
        if match is None:
            continue
        scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]
        sizes["l1d_bytes" if level == "1" else f"l{level}_bytes"] = int(match.group(1)) * scale
    return sizes
