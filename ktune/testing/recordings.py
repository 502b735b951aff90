"""The recordings bundled with ktune, by name, and small Kernel Tuner cache files made up for
a test: every config of a few knobs, all measured."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktune.search_space import recorded as _recorded

if TYPE_CHECKING:
    from ktune.tuner.sources import ReplaySource

__all__ = [
    "CONV",
    "CONV_DEVICE",
    "PNPOLY",
    "PNPOLY_DEVICE",
    "DATASETS_ENV",
    "RECORDED",
    "StampedSource",
    "datasets",
    "kt_cache",
    "recording",
    "write_kt_cache",
]

#: the folder of the bundled recordings and T1 specs (package data of ktune.search_space)
RECORDED = Path(_recorded.__file__).resolve().parent
CONV = "convolution_A4000"  # a 2-D convolution on an NVIDIA RTX A4000: 4362 configs
CONV_DEVICE = "NVIDIA RTX A4000"
PNPOLY = "pnpoly_RTX_3090"  # point-in-polygon on an NVIDIA GeForce RTX 3090: some configs fail
PNPOLY_DEVICE = "NVIDIA GeForce RTX 3090"


#: a folder of further recordings for the benchmarks (e.g. the Benchmark Hub's), never bundled
DATASETS_ENV = "KTUNE_DATASETS"


def datasets(pattern: str, bundled: str) -> list[Path]:
    """The files matching the glob ``pattern`` (e.g. ``*/*.json.gz``) under ``$KTUNE_DATASETS``,
    sorted; without that variable, those matching ``bundled`` among the bundled recordings, so
    a benchmark runs on a fresh clone. A variable naming no folder is a
    :class:`FileNotFoundError` that says so."""
    folder = os.environ.get(DATASETS_ENV)
    if not folder:
        return sorted(RECORDED.glob(bundled))
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"${DATASETS_ENV}={folder}: no such folder")
    return sorted(root.glob(pattern))


def recording(name: str) -> Path:
    """The path of the bundled recording ``name`` (``CONV``, ``PNPOLY``)."""
    return RECORDED / f"{name}.json.gz"


def kt_cache(
    values: Mapping[str, Sequence[Any]],
    time_ms: Callable[[dict[str, Any]], float],
    *,
    device: str = "GPU X",
    kernel: str = "kern",
    problem_size: Sequence[int] = (100,),
) -> dict[str, Any]:
    """A brute-forced recording of ``kernel`` on ``device`` as Kernel Tuner writes it: every
    combination of ``values`` ran, in ``time_ms(config)`` (compile and benchmark: 1 ms each)."""
    names = list(values)
    cache: dict[str, Any] = {}
    for combo in itertools.product(*values.values()):
        config = dict(zip(names, combo))
        t = float(time_ms(config))
        cache[",".join(map(str, combo))] = {
            **config,
            "time": t,
            "times": [t],
            "compile_time": 1.0,
            "benchmark_time": 1.0,
        }
    return {
        "device_name": device,
        "kernel_name": kernel,
        "problem_size": list(problem_size),
        "tune_params_keys": names,
        "tune_params": {n: list(v) for n, v in values.items()},
        "objective": "time",
        "cache": cache,
    }


def write_kt_cache(path: Path, data: dict[str, Any]) -> Path:
    """``data`` written to ``path`` as JSON; ``path``."""
    path.write_text(json.dumps(data))
    return path


class StampedSource:
    """A replay source whose device spec also carries ``toolchain`` (as a GPU's trials record
    one), so that a job's trials have a fingerprint and the log's earlier trials of the same
    can be reused; everything else is the inner source's."""

    def __init__(self, inner: ReplaySource, toolchain: Mapping[str, str]) -> None:
        self._inner = inner
        self._toolchain = dict(toolchain)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def device_spec(self) -> dict[str, Any]:
        return {**(self._inner.device_spec or {}), **self._toolchain}
