"""``ktune build``: the log's winners as a directory of compiled kernels (see the package doc).

:func:`build` plans the entry points from the log, compiles every variant and the dispatch in
a staging directory next to the output, and only then moves it into place: a failed build
leaves the output directory as it was. A directory that holds something other than an earlier
build is never replaced.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ktune.db import TuningLog
from ktune.db.engine import mask_url
from ktune.search_space.operators.cpu.base import C_TYPES
from ktune.tuner.measure.cpu_worker import Compiler, compiler_from_env
from ktune.tuner.shipping.cpu import compile_c, compile_variants
from ktune.tuner.shipping.dispatch import Entry, VariantFn, dispatch_source
from ktune.tuner.shipping.package import (
    HEADER,
    LIBRARY,
    cmake_config,
    header_text,
    pkg_config,
)
from ktune.tuner.shipping.plan import BuildError, EntryPlan, operator_of, plan_build

__all__ = ["BuildRequest", "BuildResult", "build", "default_device"]

#: linked with every CPU library's users (OpenMP, and log() in the dispatch)
CPU_LINK = ("-fopenmp", "-lm")
#: what the dispatch is compiled with (it holds no kernel)
DISPATCH_FLAGS = ("-std=c11", "-O2", "-fPIC", "-c")


@dataclass(frozen=True)
class BuildRequest:
    """What to build: operators (and dtypes; all tuned ones when empty) on one device, the
    GPU architectures for GPU operators, and the output directory."""

    operators: tuple[str, ...]
    out: Path
    device: str | None = None
    dtypes: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    allow_stale: bool = False


@dataclass(frozen=True)
class BuildResult:
    out: Path
    device: str
    manifest: dict[str, Any] = field(repr=False)

    @property
    def entries(self) -> list[str]:
        return [e["name"] for e in self.manifest["entries"]]

    @property
    def variants(self) -> int:
        return sum(len(e["variants"]) for e in self.manifest["entries"])


def default_device(tlog: TuningLog, operators: Sequence[str]) -> str:
    """The one device with tuned configs of ``operators`` (this CPU first when it is one)."""
    names = sorted({r.device_name for op in operators for r in tlog.tuned_configs(operator=op)})
    if len(names) == 1:
        return names[0]
    if not names:
        raise BuildError(f"the log has no tuned {', '.join(operators)} on any device")
    from ktune.tuner.measure.cpu_detect import cpu_spec

    local = cpu_spec()["name"]
    if local in names:
        return str(local)
    raise BuildError(f"name a --device: the log has {', '.join(operators)} on {'; '.join(names)}")


def build(
    tlog: TuningLog, request: BuildRequest, *, compiler: Compiler | None = None
) -> BuildResult:
    """Build ``request`` from ``tlog``; a :class:`BuildError` (output left untouched) when it
    cannot be built."""
    out = request.out.resolve()
    _check_replaceable(out)
    if not request.operators:
        raise BuildError("name at least one --operator")
    for name in request.operators:
        operator_of(name)
    device = request.device or default_device(tlog, request.operators)
    plans = plan_build(
        tlog, request.operators, device, request.dtypes, allow_stale=request.allow_stale
    )
    gpu = {p.gpu for p in plans}
    if len(gpu) > 1:
        raise BuildError("a build is for one device: build CPU and GPU operators separately")
    compiler = compiler or compiler_from_env()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.building-"))
    try:
        manifest = _build_into(staging, plans, device, gpu.pop(), request, compiler, tlog)
        _move_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return BuildResult(out, device, manifest)


def _check_replaceable(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise BuildError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise BuildError(f"{out} is not empty and holds no earlier ktune build: not replacing it")


def _move_into_place(staging: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _entries(plans: Sequence[EntryPlan]) -> list[Entry]:
    entries = []
    for plan in plans:
        variants = tuple(VariantFn(v.symbol, v.config, plan.requirements) for v in plan.variants)
        # fp16 has no C type: GPU entry points take it as void pointers
        element = C_TYPES.get(plan.dtype) if plan.dtype in ("float32", "float64") else None
        entries.append(
            Entry(
                plan.name,
                plan.abi,
                element,
                plan.gpu,
                variants,
                tuple(plan.tuned()),
                plan.default,
            )
        )
    return entries


def _build_into(
    root: Path,
    plans: Sequence[EntryPlan],
    device: str,
    gpu: bool,
    request: BuildRequest,
    compiler: Compiler,
    tlog: TuningLog,
) -> dict[str, Any]:
    include, lib, src, obj = (root / d for d in ("include", "lib", "src", "obj"))
    for d in (include, lib, src, obj):
        d.mkdir()
    entries = _entries(plans)
    (include / HEADER).write_text(header_text(entries), encoding="utf-8")
    if gpu:
        from ktune.tuner.shipping.gpu_link import gpu_objects

        record = tlog.get_device(device)
        objects, link, archs = gpu_objects(
            plans, request.archs, src, obj, record.spec if record else None
        )
    else:
        built = compile_variants(plans, src, obj, compiler)
        objects, link, archs = [o.path for o in built.values()], list(CPU_LINK), []
    dispatch = src / "dispatch.c"
    dispatch.write_text(dispatch_source(entries, HEADER), encoding="utf-8")
    compile_c(
        compiler.command,
        (*DISPATCH_FLAGS, f"-I{include}"),
        dispatch,
        obj / "dispatch.o",
        what="the dispatch",
    )
    objects.append(obj / "dispatch.o")
    _archive(lib / f"lib{LIBRARY}.a", objects)
    _link_shared(compiler, lib / f"lib{LIBRARY}.so", objects, link)
    shutil.rmtree(obj)
    version = _ktune_version()
    (lib / "cmake" / LIBRARY).mkdir(parents=True)
    (lib / "cmake" / LIBRARY / f"{LIBRARY}Config.cmake").write_text(
        cmake_config([x.removeprefix("-l") if x.startswith("-l") else x for x in link]),
        encoding="utf-8",
    )
    (lib / "pkgconfig").mkdir()
    (lib / "pkgconfig" / f"{LIBRARY}.pc").write_text(pkg_config(version, link), encoding="utf-8")
    manifest = _manifest(plans, entries, device, gpu, archs, link, compiler, tlog, version)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _archive(target: Path, objects: Sequence[Path]) -> None:
    ar = shutil.which("ar")
    if ar is None:
        raise BuildError("no 'ar' to make the static library (install binutils)")
    done = subprocess.run(
        [ar, "rcs", str(target), *map(str, objects)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BuildError(f"ar failed: {done.stderr.strip().splitlines()[:1]}")


def _link_shared(
    compiler: Compiler, target: Path, objects: Sequence[Path], link: Sequence[str]
) -> None:
    done = subprocess.run(
        [*compiler.command, "-shared", "-o", str(target), *map(str, objects), *link],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BuildError(
            f"linking the shared library failed: {(done.stderr or done.stdout).strip()[:300]}"
        )


def _ktune_version() -> str:
    from ktune.tuner.jobs import toolchain

    return toolchain()["ktune"]


def _manifest(
    plans: Sequence[EntryPlan],
    entries: Sequence[Entry],
    device: str,
    gpu: bool,
    archs: Sequence[str],
    link: Sequence[str],
    compiler: Compiler,
    tlog: TuningLog,
    version: str,
) -> dict[str, Any]:
    record = tlog.get_device(device)
    out_entries = []
    for plan, entry in zip(plans, entries):
        abi = plan.abi
        out_entries.append(
            {
                "name": plan.name,
                "operator": plan.operator.name,
                "dtype": plan.dtype,
                "layout": plan.layout,
                "gpu": gpu,
                "element": entry.element,
                "sizes": list(abi.sizes),
                "derived": [list(d) for d in abi.derived],
                "nonnegative": list(abi.nonnegative),
                "defaults": dict(abi.defaults),
                "pointers": [
                    {
                        "name": p.name,
                        "output": p.output,
                        "dims": list(p.dims),
                        "dtype": p.dtype or plan.dtype,
                    }
                    for p in abi.pointers
                ],
                "requirements": list(plan.requirements),
                "default_variant": plan.default,
                "variants": [
                    {
                        "index": i,
                        "symbol": v.symbol,
                        "config": v.config,
                        "default": v.default,
                        "measured_with": {
                            k: v.toolchain[k] for k in ("compiler", "cflags") if k in v.toolchain
                        },
                        "serves": [
                            {
                                "workload": w.workload.key,
                                "sizes": list(w.sizes),
                                "time_ms": w.time_ms,
                                "job_id": w.job_id,
                                "seq": w.seq,
                                "trial_id": w.trial_id,
                                "confirmed_ms": w.confirmed_ms,
                                "noise_band": w.noise_band,
                                "flag": w.flag,
                                "stale": w.stale,
                            }
                            for w in v.serves
                        ],
                    }
                    for i, v in enumerate(plan.variants)
                ],
            }
        )
    return {
        "format": 1,
        "ktune": version,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "log": mask_url(tlog.url),
        "device": {
            "name": device,
            "kind": "gpu" if gpu else "cpu",
            "spec": record.spec if record else None,
        },
        "toolchain": {
            "compiler": " ".join(compiler.command),
            "compiler_version": _version(compiler),
            "architectures": list(archs),
        },
        "libraries": {"static": f"lib/lib{LIBRARY}.a", "shared": f"lib/lib{LIBRARY}.so"},
        "header": f"include/{HEADER}",
        "link": list(link),
        "entries": out_entries,
    }


def _version(compiler: Compiler) -> str:
    try:
        return compiler.version()
    except (OSError, subprocess.SubprocessError):
        return ""
