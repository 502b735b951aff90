"""Device specifications: the :class:`DeviceSpec` record, the shipped catalog, name matching.

The catalog (``catalog.json`` beside this module) holds vendor public specifications of
well-known GPUs, each entry with the documents it was taken from (``source``). Every field of
an entry is checked when the catalog is loaded: a missing or malformed field is a
:class:`CatalogError` then, never a NaN in a model's features later.

Names are matched as vendors report them (Kernel Tuner cache headers, CUDA's and ROCm's device
name): a name is *normalised* (case, runs of ``-``/``_``/space, a leading vendor word) and then
looked up **exactly** in a table of every entry's name and aliases. There is deliberately no
fuzzy matching: ``A100`` alone could be four different boards, and a wrong spec is worse than
none. An unknown or empty name resolves to ``None``; callers then use the spec-less embedding
(:func:`ktune.cost_model.embedding.embed`) and say so. LLVM ``gfx`` target names name an
architecture, not a board (``gfx90a`` is the MI210, MI250 and MI250X), so they resolve only
where the catalog's entry is the sole product of that target.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "CATALOG_PATH",
    "Catalog",
    "CatalogError",
    "DeviceSpec",
    "default_catalog",
    "normalise_name",
    "resolve",
    "spec_from_cuda_properties",
]

CATALOG_PATH = Path(__file__).with_name("catalog.json")


class CatalogError(ValueError):
    """A catalog file or a spec dict is malformed (missing or invalid field, duplicate name)."""


@dataclass(frozen=True)
class DeviceSpec:
    """What the cost model knows of a GPU. Per-SM fields are per CU on AMD.

    Units: clocks in MHz, bandwidth in GB/s, memory in GB, caches and shared memory in KiB,
    rates in TFLOPS (dense, no sparsity). ``peak_fp16_tflops`` is the dense FP16 rate of the
    tensor/matrix cores where the GPU has them, else of packed FP16 vector math.
    ``shared_memory_per_block_kib`` is the default limit per block,
    ``shared_memory_per_block_optin_kib`` the most a kernel may opt in to.
    ``max_blocks_per_sm`` is the resident-block limit (on AMD: of workgroups of more than one
    wavefront, which the barrier count limits).
    """

    name: str
    vendor: str
    architecture: str
    compute_capability: str  # "8.0" on NVIDIA, the LLVM target ("gfx90a") on AMD
    sm_count: int
    fp32_lanes_per_sm: int
    boost_clock_mhz: float
    memory_bandwidth_gbs: float
    memory_gb: float
    l2_cache_kib: float
    shared_memory_per_sm_kib: float
    shared_memory_per_block_kib: float
    shared_memory_per_block_optin_kib: float
    registers_per_sm: int
    registers_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    warp_size: int
    peak_fp32_tflops: float
    peak_fp16_tflops: float
    source: str
    notes: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "str":
                if not isinstance(value, str):
                    raise CatalogError(f"device {self.name!r}: {f.name} must be a string")
                if f.name != "notes" and not value.strip():
                    raise CatalogError(f"device {self.name!r}: {f.name} is empty")
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CatalogError(
                    f"device {self.name!r}: {f.name} must be a number, got {value!r}"
                )
            if f.type == "int" and value != int(value):
                raise CatalogError(
                    f"device {self.name!r}: {f.name} must be an integer, got {value}"
                )
            if not (math.isfinite(value) and value > 0):
                raise CatalogError(f"device {self.name!r}: {f.name} must be positive, got {value}")
            object.__setattr__(self, f.name, int(value) if f.type == "int" else float(value))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceSpec:
        """A spec from a dict holding every field (``notes`` may be left out); extra keys are
        ignored. A missing field is a :class:`CatalogError` naming it."""
        if not isinstance(data, Mapping):
            raise CatalogError(f"a device spec must be an object, got {type(data).__name__}")
        label = data.get("name", "?")
        required = [f.name for f in fields(cls) if f.default is dataclasses.MISSING]
        missing = [n for n in required if n not in data]
        if missing:
            raise CatalogError(f"device {label!r}: missing field(s) {', '.join(missing)}")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- names

_SEPARATORS = re.compile(r"[\s_\-]+")
_VENDOR_WORDS = ("nvidia ", "amd ")
_GFX = re.compile(r"^(gfx[0-9a-f]+)(:.*)?$")


def normalise_name(name: str) -> str:
    """Case-folded, separators collapsed to one space, a leading ``NVIDIA``/``AMD`` dropped.

    ``NVIDIA A100-PCIE-40GB`` and ``a100 pcie 40gb`` normalise alike; ``gfx90a:sramecc+:xnack-``
    becomes ``gfx90a`` (the target features are not part of the identity).
    """
    text = _SEPARATORS.sub(" ", str(name).strip().casefold()).strip()
    gfx = _GFX.match(text.replace(" ", ""))
    if gfx:
        return gfx.group(1)
    for word in _VENDOR_WORDS:
        text = text.removeprefix(word)
    return text


class Catalog:
    """Device specs addressed by any of their vendor-reported names."""

    def __init__(self, entries: Iterable[tuple[DeviceSpec, Iterable[str]]]) -> None:
        self._specs: dict[str, DeviceSpec] = {}
        self._by_name: dict[str, DeviceSpec] = {}
        for spec, aliases in entries:
            if spec.name in self._specs:
                raise CatalogError(f"device {spec.name!r} is listed twice")
            self._specs[spec.name] = spec
            for alias in {spec.name, *aliases}:
                key = normalise_name(alias)
                other = self._by_name.get(key)
                if other is not None and other.name != spec.name:
                    raise CatalogError(
                        f"name {alias!r} is claimed by both {other.name!r} and {spec.name!r}"
                    )
                self._by_name[key] = spec

    @classmethod
    def load(cls, path: str | Path = CATALOG_PATH) -> Catalog:
        """Read and validate a catalog file; any problem is a one-line :class:`CatalogError`."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CatalogError(f"{path}: cannot read the device catalog ({exc})") from None
        devices = data.get("devices") if isinstance(data, dict) else None
        if not isinstance(devices, list) or not devices:
            raise CatalogError(f"{path}: no 'devices' list")
        entries = []
        for i, entry in enumerate(devices):
            try:
                spec = DeviceSpec.from_dict(entry)
                aliases = entry.get("aliases", [])
                if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                    raise CatalogError(f"device {spec.name!r}: aliases must be a list of names")
            except CatalogError as exc:
                raise CatalogError(f"{path}: entry {i}: {exc}") from None
            entries.append((spec, aliases))
        try:
            return cls(entries)
        except CatalogError as exc:
            raise CatalogError(f"{path}: {exc}") from None

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._specs.values())

    def names(self) -> list[str]:
        return list(self._specs)

    def get(self, name: str | None) -> DeviceSpec | None:
        """The spec of the device called ``name`` (any known spelling), else ``None``."""
        if not name or not str(name).strip():
            return None
        return self._by_name.get(normalise_name(name))


@cache
def default_catalog() -> Catalog:
    """The catalog shipped with ktune (loaded once)."""
    return Catalog.load()


def resolve(name: str | None, stored: Mapping[str, Any] | None = None) -> DeviceSpec | None:
    """The spec of a device as the log knows it: a complete spec stored with the device (e.g.
    by a CuPy worker) first, then the shipped catalog by name; ``None`` when neither has it."""
    if stored:
        try:
            return DeviceSpec.from_dict({"name": name or "", "source": "stored", **stored})
        except (CatalogError, TypeError):
            pass  # an incomplete stored spec: fall back to the catalog
    return default_catalog().get(name)


# ----------------------------------------------------------------------------- CUDA properties

# FP32 lanes and dense FP16 tensor-core FLOP per SM per clock, by compute capability major.minor
# (CUDA C++ Programming Guide "Arithmetic Instructions"; tensor rates from the architecture
# whitepapers: Volta/Turing 8 cores x 64 FMA, Ampere GA100 4 x 256, GA10x/Ada 4 x 128
# (FP16 accumulate), Hopper 4 x 512).
# The third number is the resident-block limit per SM, used when the properties lack
# ``maxBlocksPerMultiProcessor``.
_CC_RATES = {
    (7, 0): (64, 1024, 32),
    (7, 2): (64, 1024, 32),
    (7, 5): (64, 1024, 16),
    (8, 0): (64, 2048, 32),
    (8, 6): (128, 1024, 16),
    (8, 7): (128, 1024, 16),
    (8, 9): (128, 1024, 24),
    (9, 0): (128, 4096, 32),
}
_CC_ARCH = {7: "Volta/Turing", 8: "Ampere/Ada", 9: "Hopper"}
_PROPERTY_KEYS = (
    "name", "major", "minor", "multiProcessorCount", "clockRate", "memoryClockRate",
    "memoryBusWidth", "totalGlobalMem", "l2CacheSize", "sharedMemPerMultiprocessor",
    "sharedMemPerBlock", "regsPerMultiprocessor", "regsPerBlock",
    "maxThreadsPerMultiProcessor", "maxThreadsPerBlock", "warpSize",
)  # fmt: skip


def spec_from_cuda_properties(props: Mapping[str, Any]) -> DeviceSpec:
    """A spec from ``cupy.cuda.runtime.getDeviceProperties(i)`` (a plain dict; no GPU needed).

    Limits come straight from the properties; peak rates are estimated from the SM count,
    the clock and the per-SM rates of the compute capability; bandwidth is
    ``2 x memoryClockRate x memoryBusWidth`` (double data rate). A missing key or an unknown
    compute capability is a :class:`CatalogError` naming it.
    """
    missing = [k for k in _PROPERTY_KEYS if k not in props]
    if missing:
        raise CatalogError(f"device properties lack {', '.join(missing)}")
    raw_name = props["name"]
    name = raw_name.decode(errors="replace") if isinstance(raw_name, bytes) else str(raw_name)
    name = name.rstrip("\x00").strip()
    cc = (int(props["major"]), int(props["minor"]))
    if cc not in _CC_RATES:
        raise CatalogError(
            f"device {name!r}: no per-SM rates known for compute capability {cc[0]}.{cc[1]}"
        )
    lanes, fp16_per_clock, blocks_per_sm = _CC_RATES[cc]
    sms = int(props["multiProcessorCount"])
    clock_mhz = float(props["clockRate"]) / 1e3  # kHz
    optin = float(props.get("sharedMemPerBlockOptin") or props["sharedMemPerBlock"])
    return DeviceSpec(
        name=name,
        vendor="NVIDIA",
        architecture=_CC_ARCH.get(cc[0], "NVIDIA"),
        compute_capability=f"{cc[0]}.{cc[1]}",
        sm_count=sms,
        fp32_lanes_per_sm=lanes,
        boost_clock_mhz=clock_mhz,
        memory_bandwidth_gbs=_ddr_bandwidth_gbs(props["memoryClockRate"], props["memoryBusWidth"]),
        memory_gb=float(props["totalGlobalMem"]) / 1e9,
        l2_cache_kib=float(props["l2CacheSize"]) / 1024,
        shared_memory_per_sm_kib=float(props["sharedMemPerMultiprocessor"]) / 1024,
        shared_memory_per_block_kib=float(props["sharedMemPerBlock"]) / 1024,
        shared_memory_per_block_optin_kib=optin / 1024,
        registers_per_sm=int(props["regsPerMultiprocessor"]),
        registers_per_block=int(props["regsPerBlock"]),
        max_threads_per_sm=int(props["maxThreadsPerMultiProcessor"]),
        max_blocks_per_sm=int(props.get("maxBlocksPerMultiProcessor") or blocks_per_sm),
        max_threads_per_block=int(props["maxThreadsPerBlock"]),
        warp_size=int(props["warpSize"]),
        peak_fp32_tflops=sms * lanes * 2 * clock_mhz / 1e6,
        peak_fp16_tflops=sms * fp16_per_clock * clock_mhz / 1e6,
        source=(
            "CUDA device properties "
            "(peak rates estimated from SM count, clock and compute capability)"
        ),
    )


def _ddr_bandwidth_gbs(memory_clock_khz: float, bus_width_bits: float) -> float:
    """Peak DRAM bandwidth: two transfers per memory clock over the whole bus."""
    return 2 * float(memory_clock_khz) * 1e3 * float(bus_width_bits) / 8 / 1e9
