"""What the local CPU is: the spec dict the ``cpu`` backend stores with its device.

Read from ``/proc/cpuinfo`` and ``/sys/devices/system/cpu`` (Linux); where those are missing
the fields fall back to :mod:`platform` and ``os.cpu_count()``. The device's name holds what
changes a CPU kernel's best config: the model string, the cores this process may use, the
widest vector ISA and the data cache sizes
(``AMD EPYC 7763 64-Core Processor (8 cores, avx2, L1d 32K, L2 512K, L3 32M)``), so that two
VMs reporting one model string with other cores, vector units or caches are different devices
to the log. The rest (vendor, family/model/stepping, vector registers, the host's CPU count)
is in the spec. Logs written before the ISA and caches were in the name keep their devices
under the names they had (``AMD EPYC (2 cores)``).
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Any

__all__ = ["cpu_spec", "former_names"]

_CPUINFO = Path("/proc/cpuinfo")
_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}
# data caches named in the device, smallest first
_CACHE_LABELS = (("l1d_bytes", "L1d"), ("l2_bytes", "L2"), ("l3_bytes", "L3"))
# spec key -> /proc/cpuinfo field, kept in the spec (not the name)
_IDENTITY = (
    ("family", "cpu family"),
    ("model_number", "model"),
    ("stepping", "stepping"),
    ("microcode", "microcode"),
)
# widest vector extension (its flag) -> (ISA level named in the device, bytes per vector
# register, number of vector registers)
_VECTORS = (
    ("avx512f", "avx512", 64, 32),
    ("avx2", "avx2", 32, 16),
    ("avx", "avx", 32, 16),
    ("sse4_2", "sse4.2", 16, 16),
    ("sse2", "sse2", 16, 16),
    ("asimd", "neon", 16, 32),
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
    isa, vector_bytes, registers = next(
        ((level, b, r) for flag, level, b, r in _VECTORS if flag in flags), ("", 16, 16)
    )
    sizes = _cache_sizes(caches if caches is not None else _CACHES)
    traits = [f"{cores} cores", *([isa] if isa else [])]
    traits += [f"{label} {_size(sizes[key])}" for key, label in _CACHE_LABELS if key in sizes]
    model = " ".join(model.split())
    spec: dict[str, Any] = {
        "name": f"{model} ({', '.join(traits)})",
        "kind": "cpu",
        "model": model,
        "vendor": _VENDORS.get(
            info.get("vendor_id", ""), info.get("vendor_id") or platform.machine()
        ),
        "architecture": platform.machine(),
        "cores": cores,
        "host_cpus": os.cpu_count() or cores,
        "isa": isa or "unknown",
        "vector_bytes": vector_bytes,
        "vector_registers": registers,
    }
    identity = {k: info[f] for k, f in _IDENTITY if info.get(f)}
    spec.update(identity)
    spec.update(sizes)
    return spec


def former_names(spec: dict[str, Any]) -> tuple[str, ...]:
    """The names earlier ktune versions gave the CPU of ``spec`` (model and cores only), so
    that a job started under one resumes here as the device it started on."""
    model, cores = spec.get("model"), spec.get("cores")
    return (f"{model} ({cores} cores)",) if model and cores else ()


def _size(n: int) -> str:
    """A cache size as sysfs writes it: ``32K``, ``32M``."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


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
