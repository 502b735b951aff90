"""ktune's operators on the local GPU: tuned best vs the vendor path, and vs the roofline.

For each operator (and dtype) and 3 shapes, tunes with the ``cupy`` backend (``--budget``
measurements, default 200) and times, in this same process and with the same timing code
(CUDA events, warm-up, L2 flush, median), the vendor path:

    matmul      cupy.matmul (cuBLAS)
    conv2d      cuDNN: cupyx.cudnn.convolution_forward, else torch's conv2d, else nothing
    reduction   cupy.sum / cupy.max over the last axis
    softmax     cupyx.scipy.special.softmax
    transpose   cupy.ascontiguousarray(x.T) (CuPy's copy kernel)

It prints a Markdown table: best time, vendor time, vendor/ours (>1: ours is faster), the
roofline time max(FLOPs / peak, bytes / bandwidth) with the peak from the device spec (fp16
tensor-core peak for fp16 matmul) and the bandwidth measured here with a device-to-device
copy, and the fraction of the roofline reached. Exits 2 with a one-line message without a GPU,
1 when some case had no configuration that ran (each such case, with its statuses, is printed).

    .venv/bin/python benchmarks/gpu_operators.py [--only matmul-float16 ...]
        [--shapes 4096x4096x4096 ...] [--budget 200] [--strategy optuna] [--seed 1]
        [--out results.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.search_space.operators import DeviceLimits, get
from ktune.search_space.workload import Workload
from ktune.tuner import strategies
from ktune.tuner.budget import Budget
from ktune.tuner.loop import Batch, Tuner
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.cupy_backend import CupyBackend
from ktune.tuner.measure.detect import detect_devices
from ktune.tuner.measure.worker import TimingSettings, time_gpu

# (operator, dtype, layout): three shapes each
CASES: dict[tuple[str, str, str], list[str]] = {
    ("matmul", "float16", ""): ["1024x1024x1024", "4096x4096x4096", "8192x8192x8192"],
    ("matmul", "float32", ""): ["1024x1024x1024", "4096x4096x4096", "2048x2048x8192"],
    ("conv2d", "float32", "NCHW"): [
        "32x64x56x56x64x3x3x1x1x1x1x1x1",
        "32x128x28x28x128x3x3x1x1x1x1x1x1",
        "32x256x14x14x256x3x3x1x1x1x1x1x1",
    ],
    ("reduction", "float32", "sum"): ["4096x4096", "65536x256", "16x4194304"],
    ("reduction", "float16", "max"): ["4096x4096", "65536x256", "16x4194304"],
    ("softmax", "float16", ""): ["4096x4096", "32768x1024", "1024x32000"],
    ("transpose", "float32", ""): ["4096x4096", "8192x8192", "16384x1024"],
}


def vendor(
    op_name: str, workload: Workload, args: list[Any]
) -> tuple[str, Callable[[], Any] | None]:
    """The vendor path for a workload as (label, callable on device arrays)."""
    import cupy as cp

    if op_name == "matmul":
        a, b, c = args
        return "cuBLAS (cupy.matmul)", lambda: cp.matmul(a, b, out=c)
    if op_name == "reduction":
        x, out = args
        if workload.layout == "max":
            return "cupy.max", lambda: cp.max(x, axis=1)
        return "cupy.sum", lambda: cp.sum(x, axis=1, dtype=cp.float32, out=out)
    if op_name == "softmax":
        from cupyx.scipy.special import softmax

        x, _ = args
        return "cupyx.scipy.special.softmax", lambda: softmax(x, axis=1)
    if op_name == "transpose":
        x, _ = args
        return "cupy.ascontiguousarray(x.T)", lambda: cp.ascontiguousarray(x.T)
    if op_name == "conv2d":
        return conv_vendor(workload, args)
    return "-", None


def conv_vendor(workload: Workload, args: list[Any]) -> tuple[str, Callable[[], Any] | None]:
    """cuDNN for a convolution: through ``cupyx.cudnn`` where CuPy was built with it, else
    through PyTorch (``torch.nn.functional.conv2d`` on the same arrays, via DLPack). TF32 is off
    for fp32, the same math as ours; cuDNN's own algorithm search is on in both."""
    from ktune.search_space.operators.conv2d import Conv2d

    x, w, y = args
    cs, _ = Conv2d().conv_shape(workload)
    pad, stride, dil = (cs.ph, cs.pw), (cs.sh, cs.sw), (cs.dh, cs.dw)
    reasons = []
    try:
        from cupyx import cudnn

        core = "never" if workload.dtype == "float32" else "auto"

        def run_cupy() -> None:
            cudnn.convolution_forward(
                x, w, None, y, pad, stride, dil, 1, auto_tune=True, tensor_core=core
            )

        run_cupy()
        return "cuDNN (cupyx.cudnn)", run_cupy
    except Exception as exc:  # noqa: BLE001 - try PyTorch's cuDNN next
        reasons.append(f"cupyx.cudnn: {type(exc).__name__}: {exc}")
    try:
        import torch
        import torch.nn.functional as F

        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = workload.dtype != "float32"
        tx, tw = torch.from_dlpack(x), torch.from_dlpack(w)

        def run_torch() -> Any:  # the legacy default stream, as CuPy's timing events
            return F.conv2d(tx, tw, None, stride, pad, dil)

        got = run_torch()
        torch.cuda.synchronize()
        if tuple(got.shape) != tuple(y.shape):
            raise ValueError(f"output shape {tuple(got.shape)}, expected {tuple(y.shape)}")
        return f"cuDNN (torch {torch.__version__})", run_torch
    except Exception as exc:  # noqa: BLE001 - no cuDNN: say so in the table, and why
        reasons.append(f"torch: {type(exc).__name__}: {exc}")
    print(f"cuDNN unavailable: {'; '.join(reasons)}"[:400], file=sys.stderr)
    return "cuDNN unavailable", None


def copy_bandwidth(settings: TimingSettings, l2_bytes: int) -> float:
    """GB/s of a 1 GiB device-to-device copy, counting bytes read and written."""
    import cupy as cp

    src = cp.ones(1 << 28, dtype=cp.float32)
    dst = cp.empty_like(src)
    times = time_gpu(lambda: dst.__setitem__(Ellipsis, src), settings, l2_bytes=l2_bytes)
    times.sort()
    return 2 * src.nbytes / (times[len(times) // 2] / 1e3) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", nargs="*", default=None, help="cases like matmul-float16 or reduction-float32-sum"
    )
    parser.add_argument(
        "--shapes", nargs="*", default=None, help="only these shapes of the chosen cases"
    )
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--strategy", default=strategies.DEFAULT)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    known = {shape for shapes in CASES.values() for shape in shapes}
    unknown = [shape for shape in args.shapes or [] if shape not in known]
    if unknown:
        print(
            f"gpu_operators: --shapes {' '.join(unknown)}: not a shape of any case "
            f"(they are {', '.join(sorted(known))})"[:400],
            file=sys.stderr,
        )
        return 2

    try:
        spec = detect_devices()[0]
    except BackendError as exc:
        print(
            f"gpu_operators: this benchmark needs an NVIDIA GPU with CuPy: {exc}", file=sys.stderr
        )
        return 2
    import cupy as cp

    settings = TimingSettings()
    l2 = int(spec.get("l2_bytes", 0))
    bandwidth = copy_bandwidth(settings, l2)
    limits = DeviceLimits.from_spec(spec)
    print(
        f"device: {spec['name']} (cc {spec['compute_capability']}, {spec['sm_count']} SMs), "
        f"CUDA runtime {spec.get('cuda_runtime')}, driver {spec.get('cuda_driver')}, "
        f"CuPy {cp.__version__}, "
        f"Python {platform.python_version()}, {datetime.date.today()}"
    )
    print(
        f"measured copy bandwidth {bandwidth:.0f} GB/s; "
        f"nominal peaks FP32 {spec['peak_fp32_tflops']:.1f}, "
        f"FP16 tensor {spec['peak_fp16_tflops']:.1f} TFLOP/s; "
        f"budget {args.budget}, strategy {args.strategy}\n"
    )
    print(
        "| operator | shape | configs | ours ms | vendor | vendor ms | vendor/ours | "
        "roofline ms | of roofline | tuning s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    failed: list[str] = []
    for (name, dtype, layout), shapes in CASES.items():
        label = "-".join(p for p in (name, dtype, layout) if p)
        if args.only and not any(label.startswith(o) for o in args.only):
            continue
        op = get(name)
        for shape in shapes:
            if args.shapes and shape not in args.shapes:
                continue
            workload = op.workload(shape, dtype, layout)
            space = op.space(workload, limits)
            started = time.perf_counter()
            statuses: Counter[str] = Counter()
            first_error: list[str] = []
            trace: list[float | None] = []  # each measurement's ms in order (None: did not run)

            def note(batch: Batch) -> None:
                for m in batch.measurements:
                    statuses[str(m.status)] += 1
                    trace.append(m.time_ms if m.ok else None)
                    if m.error and not first_error:
                        first_error.append(m.error)

            backend = CupyBackend(
                name, workload, settings=settings, timeout_s=args.timeout, seed=args.seed
            )
            try:
                strategy = strategies.create(args.strategy, space, seed=args.seed)
                outcome = Tuner(
                    space,
                    strategy,
                    backend,
                    budget=Budget(max_trials=args.budget),
                    on_batch=[note],
                ).run()
            finally:
                backend.close()
            tuning_s = time.perf_counter() - started
            best = outcome.state.best_ms
            host = op.arguments(workload, np.random.default_rng(args.seed))
            dev = [cp.asarray(v) if isinstance(v, np.ndarray) else v for v in host.values]
            vlabel, run = vendor(name, workload, dev)
            vms = None
            if run is not None:
                times = time_gpu(run, settings, l2_bytes=l2)
                vms = float(np.median(times))
            peak = (
                spec["peak_fp16_tflops"]
                if (name == "matmul" and dtype == "float16")
                else spec["peak_fp32_tflops"]
            )
            roof = (
                max(
                    op.flops(workload) / (peak * 1e12), op.bytes_moved(workload) / (bandwidth * 1e9)
                )
                * 1e3
            )
            row = {
                "case": label,
                "shape": workload.key,
                "configs": len(space),
                "best_ms": best,
                "best_config": outcome.state.best_config,
                "vendor": vlabel,
                "vendor_ms": vms,
                "roofline_ms": roof,
                "tuning_s": tuning_s,
                "trials": outcome.state.n_trials,
                "statuses": dict(statuses),
                "trace_ms": trace,
                "first_error": first_error[0] if first_error else None,
            }
            rows.append(row)
            if args.out:  # after each row: a run cut off by a time limit keeps what it measured
                args.out.write_text(
                    json.dumps({"device": spec, "bandwidth_gbs": bandwidth, "rows": rows}, indent=1)
                )
            fmt = lambda v: "-" if v is None else f"{v:.4g}"
            ratio = f"{vms / best:.2f}" if (vms and best) else "-"
            frac = f"{roof / best:.2f}" if best else "-"
            print(
                f"| {label} | {shape} | {len(space)} | {fmt(best)} | "
                f"{vlabel} | {fmt(vms)} | {ratio} | "
                f"{roof:.4g} | {frac} | {tuning_s:.0f} |",
                flush=True,
            )
            if best is None:
                failed.append(f"{label} {shape}: {dict(statuses)}; {first_error[:1]}")
            del dev
            cp.get_default_memory_pool().free_all_blocks()
    for line in failed:  # no configuration ran: the table's dashes have a reason
        print(f"no config ran: {line}"[:400])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
