"""Leave-one-GPU-out evaluation of the cost model's transfer to a GPU it has not seen.

For every recorded space (Kernel Tuner cache files; default: every one under the folder
``$KTUNE_DATASETS`` names, e.g. the Benchmark Hub's recordings, else the bundled ones), grouped
by kernel (same parameters), each GPU in turn is held out: the other GPUs' recordings are
imported into a fresh SQLite tuning log with ``ktune.tuner.importing.import_recording`` (what
``ktune import`` does), a model is trained from that log (the bounded prior a tuning job takes,
``ktune.cost_model.transfer.DEFAULT_LIMIT``: at most 1000 trials per GPU, the fastest fifth and
a uniform draw), and it ranks the held-out GPU's whole space. With 0, 10 and 30 random
measurements of the held-out GPU (several seeds for 10 and 30), the measurements join the
training data as the target group. Columns, side by side from the same run:

- ``random``: a random ranking, as an exact expectation over all draws.
- ``pooled``: the same XGBoost knowing nothing of devices: no device columns, every source
  device weighted alike.
- ``device``: ktune's model (``TransferModel``): source devices weighted by their similarity
  to the target (spec embedding, then agreement with the target's measurements), device
  columns (embedding, occupancy, waves) in the trees once the log holds at least
  ``MIN_DEVICES_FOR_COLUMNS`` devices (on the shared datasets it never does).
- ``+columns`` (only with ``--with-columns``): the device model with the device columns forced
  into the trees, the ablation that shows why they are held back with few devices.

Metrics: Spearman rank correlation between the model's score and the measured speed over
the configs that ran; ``s@k`` (TenSet's score@k) = optimum time / best time among the
target's measured configs and the model's top-k of the rest, so 1.0 is the optimum and
0.952 is "within 5%". The random ``s@k`` is the expectation over drawing m + k distinct configs.
A kernel recorded on one GPU only has nothing to transfer from: it gets the rows with target
measurements only. The last table times fit + predict at the issue's scale (10^4 training
records, a 10^4-config space) against its 2 s target.

    .venv/bin/python benchmarks/cost_model_transfer.py [FILE ...] [--seeds 3] [--with-columns]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import gammaln
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktune.cost_model import FeatureExtractor, TransferModel, XGBCostModel, resolve
from ktune.cost_model.features import parameter_signature
from ktune.cost_model.samples import Sample
from ktune.cost_model.transfer import DEFAULT_LIMIT, MIN_DEVICES_FOR_COLUMNS
from ktune.db import TuningLog
from ktune.search_space.formats import FormatError, RecordedSpace, load_cache
from ktune.testing.recordings import DATASETS_ENV, datasets
from ktune.tuner.importing import import_recording
from ktune.tuner.training import samples_from_log, transfer_model

KS = (1, 5, 10, 50)
MEASURED = (0, 10, 30)
METHODS = ("random", "pooled", "device")
ABLATION = "+columns"


@dataclass
class Row:
    kernel: str
    gpu: str
    m: int
    method: str
    spearman: list[float]
    scores: dict[int, list[float]]


def find_recordings(paths: Sequence[str]) -> list[RecordedSpace]:
    if paths:
        return [load_cache(p) for p in paths]  # given explicitly: a bad file is an error
    out = []
    for p in datasets("**/*.json*", "*.json.gz"):
        try:
            out.append(load_cache(p))
        except FormatError:
            continue  # T1 specs and other JSON next to the caches
    return out


def times_of(rec: RecordedSpace) -> np.ndarray:
    """Measured time per dense index of ``rec.space``; inf where the config failed."""
    out = np.full(len(rec.space), math.inf)
    for i, c in enumerate(rec.space.configs(np.arange(len(rec.space)))):
        r = rec.lookup(c)
        if r is not None and r.status == "ok" and r.time_ms:
            out[i] = r.time_ms
    return out


def random_expectation(times: np.ndarray, n: int) -> float:
    """E[optimum / best of n distinct uniform draws] (failed configs count as infinitely slow)."""
    t = np.sort(times)
    N = len(t)
    n = min(n, N)
    j = np.arange(N)  # the draw's best is t[j] with probability C(N-1-j, n-1) / C(N, n)
    log_p = np.full(N, -np.inf)
    ok = N - 1 - j >= n - 1
    log_p[ok] = (
        gammaln(N - j[ok])
        - gammaln(n)
        - gammaln(N - j[ok] - n + 1)
        - (gammaln(N + 1) - gammaln(n + 1) - gammaln(N - n + 1))
    )
    ratio = np.where(np.isfinite(t), t[0] / t, 0.0)
    return float(np.sum(np.exp(log_p) * ratio))


def score_at(times: np.ndarray, order: np.ndarray, measured: np.ndarray, k: int) -> float:
    opt = times.min()
    rest = order[~np.isin(order, measured)][:k]
    best = min(times[measured].min() if len(measured) else math.inf, times[rest].min())
    return 0.0 if not math.isfinite(best) else opt / best


def evaluate(
    model: TransferModel, times: np.ndarray, measured: np.ndarray
) -> tuple[float, dict[int, float]]:
    score, _ = model.predict()
    ok = np.isfinite(times)
    rho = float(spearmanr(score[ok], -times[ok]).statistic)
    order = np.argsort(-score, kind="stable")
    return rho, {k: score_at(times, order, measured, k) for k in KS}


def target_samples(rec: RecordedSpace, idx: np.ndarray, times: np.ndarray) -> list[Sample]:
    spec = resolve(rec.device_name)
    configs = rec.space.configs(idx)
    out = []
    for c, i in zip(configs, idx):
        r = rec.lookup(c)
        status = r.status if r is not None else "runtime_error"
        out.append(
            Sample(
                c,
                rec.workload(),
                rec.device_name,
                spec,
                status,
                None if not np.isfinite(times[i]) else float(times[i]),
            )
        )
    return out


def build(
    method: str,
    tlog: TuningLog,
    held: RecordedSpace,
    base: list[Sample],
    extra: list[Sample],
    seed: int,
    objective: str,
    m: int,
) -> TransferModel:
    """One model of the table. Zero-shot ``device`` goes through
    ``ktune.tuner.training.transfer_model``,
    the product path; the rows with target measurements fit the same model on the log's
    samples plus the target's (what ``TransferModel.update`` does, without refitting the
    zero-shot model first)."""
    gpu, workload = held.device_name, held.workload()
    spec = resolve(gpu)
    weighting = method != "pooled"
    if method == "device" and m == 0:
        return transfer_model(tlog, held.space, workload, gpu, objective=objective, seed=seed)
    if method == "pooled":
        columns = False
    elif method == "+columns":
        columns = True
    else:  # ktune's default: columns once the log holds enough devices
        known = {s.device for s in base if s.spec is not None and s.device != gpu}
        columns = len(known) >= MIN_DEVICES_FOR_COLUMNS
    ext = FeatureExtractor(held.space.parameters, device_features=columns)
    cm = XGBCostModel(
        ext,
        target=(workload.key, gpu),
        target_spec=spec if weighting else None,
        source_weighting=weighting,
        objective=objective,
        seed=seed,
    )
    cm.fit(base + extra)
    return TransferModel(cm, held.space, workload, gpu, spec)


def run_kernel(
    recs: list[RecordedSpace],
    kernel: str,
    seeds: int,
    objective: str,
    methods: tuple[str, ...],
    rows: list[Row],
    notes: list[str],
) -> None:
    for held in recs:
        others = [r for r in recs if r is not held]
        times = times_of(held)
        gpu = held.device_name
        with tempfile.TemporaryDirectory() as tmp:
            tlog = TuningLog.open(f"sqlite:///{tmp}/log.db")
            try:
                for r in others:
                    import_recording(tlog, r)
                # what a job trains on: the bounded prior (cost_model.prior), as TransferModel
                base = (
                    samples_from_log(
                        tlog,
                        held.space.parameters,
                        limit=DEFAULT_LIMIT,
                        target=(held.workload().key, gpu),
                        target_spec=resolve(gpu),
                    )
                    if others
                    else []
                )
                for m in MEASURED:
                    if m == 0 and not others:
                        notes.append(
                            f"{kernel} on {gpu}: the only GPU recorded, so no zero-shot row"
                        )
                        continue
                    run_seeds = [0] if m == 0 else list(range(1, seeds + 1))
                    acc = {
                        meth: Row(kernel, gpu, m, meth, [], defaultdict(list)) for meth in methods
                    }
                    for seed in run_seeds:
                        rng = np.random.default_rng(seed)
                        measured = held.space.sample(m, rng) if m else np.empty(0, dtype=np.int64)
                        acc["random"].spearman.append(0.0)
                        for k in KS:
                            acc["random"].scores[k].append(random_expectation(times, m + k))
                        extra = target_samples(held, measured, times)
                        for meth in methods[1:]:
                            model = build(meth, tlog, held, base, extra, seed, objective, m)
                            rho, sc = evaluate(model, times, measured)
                            acc[meth].spearman.append(rho)
                            for k in KS:
                                acc[meth].scores[k].append(sc[k])
                    rows.extend(acc.values())
            finally:
                tlog.close()


def by_space(recs: list[RecordedSpace]) -> dict[str, list[RecordedSpace]]:
    """The recordings grouped by space (same parameters), under the kernel's name; a kernel
    recorded in several spaces (other knob values) has each labelled by its size."""
    groups: dict[tuple, list[RecordedSpace]] = defaultdict(list)
    for r in recs:
        groups[parameter_signature(r.parameters)].append(r)
    names = Counter(g[0].kernel_name for g in groups.values())
    return {
        g[0].kernel_name
        if names[g[0].kernel_name] == 1
        else f"{g[0].kernel_name} ({len(g[0].space):,} configs)": g
        for g in groups.values()
    }


def timing(
    spaces: dict[str, list[RecordedSpace]], objective: str
) -> list[tuple[str, float, float, int, int]]:
    """Fit + predict at the issue's scale: the largest recording trains, another GPU's space
    of the same kernel is predicted (features included); the single booster is the in-process
    baseline, and the 2-thread row shows what OpenMP threads cost on a shared 2-core machine."""
    pair = max(spaces.values(), key=lambda rs: len(rs[0].space))
    train, pred = pair[0], pair[-1]
    times = times_of(train)
    idx = np.arange(len(train.space))
    samples = target_samples(train, idx, times)
    out = []
    variants = (
        ("1 booster, 1 thread", 1, 1),
        ("ensemble of 4, 1 thread (ktune default)", 4, 1),
        ("ensemble of 4, 2 threads", 4, 2),
    )
    for label, members, threads in variants:
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            ext = FeatureExtractor(train.space.parameters)
            cm = XGBCostModel(ext, objective=objective, n_members=members, nthread=threads)
            cm.fit(samples)
            cm.predict_space(pred.space, pred.workload(), resolve(pred.device_name))
            best = min(best, time.perf_counter() - t0)
        out.append((label, best, best / 2.0, len(samples), len(pred.space)))
    return out


def fmt(values: list[float]) -> str:
    return f"{np.mean(values):.3f}"


def print_tables(rows: list[Row], seeds: int, methods: tuple[str, ...]) -> None:
    head = (
        "| kernel | held-out GPU | m | "
        + " | ".join(f"{meth} ρ | " + " | ".join(f"{meth} s@{k}" for k in KS) for meth in methods)
        + " |"
    )
    print(head)
    print("|" + "---|" * (3 + len(methods) * (1 + len(KS))))
    grouped: dict[tuple[str, str, int], dict[str, Row]] = defaultdict(dict)
    for r in rows:
        grouped[(r.kernel, r.gpu, r.m)][r.method] = r
    for (kernel, gpu, m), by in grouped.items():
        cells = []
        for meth in methods:
            r = by[meth]
            cells.append("-" if meth == "random" else fmt(r.spearman))
            cells += [fmt(r.scores[k]) for k in KS]
        print(f"| {kernel} | {gpu} | {m} | " + " | ".join(cells) + " |")
    print(
        f"\nm = target measurements (random; m = 10 and 30 averaged over {seeds} seeds). "
        "s@k = optimum / best of (the m measured + the model's top-k of the rest)."
    )


def check_targets(rows: list[Row]) -> None:
    zero = [r for r in rows if r.m == 0]
    dev0 = {f"{r.kernel} on {r.gpu}": r for r in zero if r.method == "device"}
    pool0 = {f"{r.kernel} on {r.gpu}": r for r in zero if r.method == "pooled"}
    within5 = sum(np.mean(r.scores[10]) >= 1 / 1.05 for r in dev0.values())
    print("\nTargets:")
    print(
        f"- zero-shot, device model top-10 within 5% of the optimum: {within5} of {len(dev0)} "
        "held-out GPUs"
    )
    worse = [k for k in dev0 if np.mean(dev0[k].scores[10]) < np.mean(pool0[k].scores[10]) - 0.01]
    print(
        f"- zero-shot, device model s@10 below pooled by more than 0.01: "
        f"{len(worse)} of {len(dev0)}" + (f" ({', '.join(worse)})" if worse else "")
    )
    m30 = [r for r in rows if r.m == 30 and r.method == "device"]
    mean_ok = sum(np.mean(r.scores[10]) >= 1 / 1.02 for r in m30)
    worst_ok = sum(min(r.scores[10]) >= 1 / 1.02 for r in m30)
    print(
        f"- 30 target measurements, device model top-10 within 2%: {mean_ok} of {len(m30)} "
        "held-out GPUs "
        f"on the mean over seeds, {worst_ok} of {len(m30)} on the worst seed"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "files",
        nargs="*",
        help=f"Kernel Tuner cache files (default: all under ${DATASETS_ENV}, else the bundled)",
    )
    ap.add_argument("--seeds", type=int, default=3, help="seeds for the 10 and 30 measurement rows")
    ap.add_argument("--objective", default="throughput", choices=("throughput", "rank"))
    ap.add_argument(
        "--with-columns",
        action="store_true",
        help="add a column: the device model with the device columns forced into the trees",
    )
    ap.add_argument("--timing-only", action="store_true", help="only the fit + predict timing")
    args = ap.parse_args(argv)
    try:
        recs = find_recordings(args.files)
    except (FormatError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not recs:
        print(
            f"error: no Kernel Tuner cache file found (looked in ${DATASETS_ENV})", file=sys.stderr
        )
        return 2
    spaces = by_space(recs)
    t0 = time.perf_counter()
    if not args.timing_only:
        methods = METHODS + ((ABLATION,) if args.with_columns else ())
        rows: list[Row] = []
        notes: list[str] = []
        for label, group in spaces.items():
            run_kernel(group, label, args.seeds, args.objective, methods, rows, notes)
        print(
            f"## Leave-one-GPU-out ({len(recs)} recordings, {len(spaces)} kernels, "
            f"objective {args.objective})\n"
        )
        print_tables(rows, args.seeds, methods)
        for n in notes:
            print(f"Note: {n}")
        check_targets(rows)
    print("\n## Fit + predict time (10^4 scale)\n")
    print(
        "| model | seconds (best of 3) | ratio to the 2 s target | training records "
        "| configs predicted |"
    )
    print("|---|---|---|---|---|")
    for label, secs, ratio, n_train, n_pred in timing(spaces, args.objective):
        print(f"| {label} | {secs:.2f} | {ratio:.2f} | {n_train} | {n_pred} |")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nTotal run time {time.perf_counter() - t0:.0f} s; "
        f"load average now {load} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
