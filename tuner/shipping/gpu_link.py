"""GPU variants of a build: CUDA sources compiled by nvcc for each architecture, and how to
link them (the CUDA runtime; no NVRTC, nothing compiled at run time).

The variants' translation units and their launchers come from :mod:`ktune.tuner.shipping.cuda`;
this module writes them under ``src/``, compiles them for the requested architectures (else the
device's own, from the compute capability the log stores with it) and names the libraries a
program links with.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ktune.tuner.shipping.plan import BuildError, EntryPlan

__all__ = ["cuda_library_dir", "device_archs", "gpu_objects"]


def device_archs(spec: Mapping[str, Any] | None) -> tuple[str, ...]:
    """``("sm_80",)`` for a device whose stored spec says compute capability 8.0; () else."""
    cc = str((spec or {}).get("compute_capability", ""))
    major, _, minor = cc.partition(".")
    if major.isdigit() and minor.isdigit():
        return (f"sm_{major}{minor}",)
    return ()


def cuda_library_dir(nvcc: str | None = None) -> Path | None:
    """The CUDA toolkit's library folder (holding ``libcudart``): next to ``nvcc``, else under
    ``$CUDA_HOME``, ``$CUDA_PATH`` or ``/usr/local/cuda``."""
    found = nvcc or shutil.which("nvcc")
    roots = [Path(found).resolve().parent.parent] if found else []
    roots += [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        for candidate in (root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib"):
            if any(candidate.glob("libcudart.so*")):
                return candidate
    return None


def gpu_objects(
    plans: Sequence[EntryPlan],
    archs: Sequence[str],
    src: Path,
    obj: Path,
    spec: Mapping[str, Any] | None = None,
) -> tuple[list[Path], list[str], list[str]]:
    """Compile every variant of ``plans`` for ``archs`` (else the device's); the object files,
    the link flags of the libraries' users, and the architectures."""
    from ktune.tuner.shipping.cuda import CudaBuildError, compile_objects, variant_source

    archs = tuple(archs) or device_archs(spec)
    if not archs:
        raise BuildError("name the GPU architectures to compile for, e.g. --arch sm_80,sm_90")
    sources: dict[str, str] = {}
    for plan in plans:
        for variant in plan.variants:
            code = variant_source(
                plan.operator, plan.workload(variant), variant.config, variant.symbol
            )
            (src / f"{variant.symbol}.cu").write_text(code, encoding="utf-8")
            sources[variant.symbol] = code
    try:
        objects = compile_objects(sources, archs, obj)
    except CudaBuildError as exc:
        raise BuildError(str(exc)) from None
    libdir = cuda_library_dir()
    link = ([f"-L{libdir}", f"-Wl,-rpath,{libdir}"] if libdir else []) + [
        "-lcudart",
        "-lstdc++",
        "-lm",
    ]
    return list(objects), link, list(archs)
