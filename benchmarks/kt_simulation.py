"""Kernel Tuner 1.5 strategies in simulation mode on a recorded cache (benchmark helper).

Kernel Tuner reads plain-JSON caches only, so a ``.json.gz`` recording is unpacked to a
temporary file first (and a recording in another format, KTT output, written as a cache). The
space is passed as a membership restriction (the configs the recording holds, less
``InvalidConfig`` ones), so Kernel Tuner searches exactly the space ktune searches. Every
configuration Kernel Tuner evaluates for the first time counts as one measurement, failed ones
included (each costs a compile), which is how its own simulation runner spends ``max_fevals``.
"""

from __future__ import annotations

import functools
import gzip
import json
import random
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ktune.search_space.formats import load_recording, write_recording

__all__ = ["KT_STRATEGIES", "KTRun", "run_kernel_tuner"]

KT_STRATEGIES = (
    "adaptive_tabu_greywolf",
    "genetic_algorithm",
    "dual_annealing",
    "basinhopping",
    "pso",
    "simulated_annealing",
    "bayes_opt",
)


@dataclass(frozen=True)
class KTRun:
    keys: list[str]  # distinct configurations in the order Kernel Tuner first measured them
    seconds: float  # wall time of the whole run (strategy + simulated runner)


@functools.lru_cache(maxsize=8)
def _cache_text(path: Path, mtime_ns: int) -> str:
    """The recording at ``path`` as a plain-JSON Kernel Tuner cache (a KTT file written as one),
    converted once per file version, not once per run."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if b'"cache"' in raw and "cache" in json.loads(raw):
        return raw.decode()
    rec = load_recording(path)  # another format (KTT output)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "cache.json"
        write_recording(target, rec)
        return target.read_text()


def _plain_json(path: Path, workdir: Path) -> tuple[Path, dict[str, Any]]:
    text = _cache_text(path.resolve(), path.stat().st_mtime_ns)
    target = workdir / (path.name.split(".")[0] + ".json")
    target.write_text(text)
    return target, json.loads(text)


def run_kernel_tuner(path: Path, strategy: str, budget: int, seed: int) -> KTRun:
    """Run one Kernel Tuner strategy on one recording for ``budget`` measurements."""
    import kernel_tuner

    with tempfile.TemporaryDirectory() as tmp:
        cache, doc = _plain_json(path, Path(tmp))
        names = doc["tune_params_keys"]
        members = {k for k, v in doc["cache"].items() if v.get("time") != "InvalidConfig"}

        def member(params: dict[str, Any]) -> bool:
            return ",".join(str(params[n]) for n in names) in members

        np.random.seed(seed)
        random.seed(seed)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results, _ = kernel_tuner.tune_kernel(
                doc["kernel_name"],
                "__global__ void ktune_benchmark() {}",
                doc["problem_size"],
                [],
                {n: doc["tune_params"][n] for n in names},
                restrictions=member,
                cache=str(cache),
                simulation_mode=True,
                strategy=strategy,
                strategy_options={"max_fevals": budget},
                quiet=True,
            )
        seconds = time.perf_counter() - started
    keys: list[str] = []
    seen: set[str] = set()
    for r in results:
        key = ",".join(str(r[n]) for n in names)
        if key not in seen:
            seen.add(key)
            keys.append(key)
    return KTRun(keys[:budget], seconds)
