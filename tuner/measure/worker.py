"""The GPU side of the CuPy backend: compile, run, check and time one config (in a worker).

:class:`GpuMeasurer` is built inside a worker process (see :mod:`ktune.tuner.measure.pool`): it
selects its device, uploads the operator's arguments, computes the reference on the GPU in
float64, and keeps pristine copies of the outputs. Each call then

1. compiles the config with NVRTC through ``cupy.RawModule`` (cached per source and options);
2. checks the launch against the compiled kernel's limits (threads, registers, shared memory);
3. runs it (data arguments, then the operator's run-time sizes) once on restored outputs and
   compares with the reference (:class:`Tolerance` of the operator): a mismatch is
   ``wrong_result`` and the config is not timed;
4. times it with CUDA events: warm-up runs, then repeats until both a minimum count and a
   minimum total time, each preceded (outside the timed span) by restoring the outputs (for
   in-place and accumulating kernels) and overwriting a buffer twice the size of the L2 cache
   (or, with the flush off, a short spin kernel that keeps the GPU busy while the run is
   launched: :func:`launch_cover`).

CUDA errors after the launch poison the context (illegal address, ...): the answer then asks
the pool to replace the worker (:class:`WorkerReply` ``restart``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ktune.search_space.operators import Operator
from ktune.search_space.operators import get as get_operator
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import error_text
from ktune.tuner.measure.pool import WorkerReply
from ktune.tuner.measure.timing import TimingSettings, repeat_timed

__all__ = [
    "GpuMeasurer",
    "MeasureSpec",
    "TimingSettings",
    "l2_flusher",
    "launch_cover",
    "make_measurer",
    "time_gpu",
]

# Launch errors that leave the context usable (the launch was refused, nothing ran).
_RECOVERABLE = (
    "INVALID_VALUE",
    "OUT_OF_RESOURCES",
    "INVALID_CONFIGURATION",
    "InvalidValue",
    "LaunchOutOfResources",
    "InvalidConfiguration",
    "TOO_MANY_RESOURCES",
)


@dataclass(frozen=True)
class MeasureSpec:
    """What a worker measures: an operator (registered name or an :class:`Operator`, e.g. a
    custom one), the workload, timing settings and the seed of the inputs."""

    operator: str | Operator
    workload_key: str
    settings: TimingSettings = field(default_factory=TimingSettings)
    seed: int = 0


def make_measurer(spec: MeasureSpec, slot: int) -> GpuMeasurer:
    """Pool factory: ``functools.partial(make_measurer, spec)``; slot = device index."""
    return GpuMeasurer(spec, slot)


def l2_flusher(l2_bytes: int) -> Callable[[int], None]:
    """A function that overwrites a buffer twice the L2's size with a byte value, queued on the
    current stream: a ``cudaMemsetAsync``, bound by memory bandwidth. On an H200 it took
    0.03 ms for 120 MiB where ``ndarray.fill`` of the byte buffer (an elementwise kernel over
    every byte) took 0.59 ms, with the same kernel times after either
    (benchmarks/measure_cost.py)."""
    import cupy as cp

    buffer = cp.empty(max(2 * l2_bytes, 1), dtype=cp.uint8)

    def flush(value: int) -> None:
        stream = cp.cuda.get_current_stream().ptr
        cp.cuda.runtime.memsetAsync(buffer.data.ptr, value, buffer.nbytes, stream)

    return flush


#: a kernel that only waits ``cycles`` SM clock cycles: one thread, no memory traffic
SPIN_SOURCE = r"""
extern "C" __global__ void ktune_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""
#: about 50 us at 2 GHz: longer than a kernel launch from Python
SPIN_CYCLES = 100_000


@functools.cache
def _spin_kernel() -> Any:
    """The spin kernel, built once per process (CuPy compiles it per device on first launch)."""
    import cupy as cp

    return cp.RawKernel(SPIN_SOURCE, "ktune_spin")


def launch_cover(cycles: int = SPIN_CYCLES) -> Callable[[], None]:
    """A function that queues the spin kernel (``cycles`` clock cycles) on the current stream.

    Queued ahead of a timed run, it keeps the GPU busy while the host launches the run, so the
    start event fires when the run can start rather than while it is still being launched. On
    an H100 (2026-11-26, benchmarks/measure_cost.py) a ``cupy.sum`` of 8 MiB read 0.0259 ms
    with nothing queued ahead, 0.0070 with the spin queued and 0.0111 after an L2 flush (the
    flush, a memset, covers the launch the same way)."""
    kernel = _spin_kernel()
    arg = np.int64(cycles)

    def cover() -> None:
        kernel((1,), (1,), (arg,))

    return cover


def time_gpu(
    run: Callable[[], Any],
    settings: TimingSettings,
    before: Callable[[], Any] | None = None,
    l2_bytes: int = 0,
    cover_launch: bool = True,
) -> list[float]:
    """Milliseconds of each timed ``run()`` (CUDA events); ``before()`` and then an L2 flush
    (or, without one, :func:`launch_cover`'s spin unless ``cover_launch`` is off) untimed."""
    import cupy as cp

    # queued ahead of timed run number i, untimed: an L2 flush, else the launch cover
    ahead: Callable[[int], None] | None = None
    if settings.flush_l2 and l2_bytes:
        flush = l2_flusher(l2_bytes)
        ahead = lambda i: flush(i % 251)
    elif cover_launch:
        cover = launch_cover()
        ahead = lambda i: cover()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    runs = 0

    def prepare() -> None:  # as before the shared loop: warm-ups, a sync, then flushed repeats
        nonlocal runs
        timed_run = runs - settings.warmup
        if timed_run == 0:
            cp.cuda.Device().synchronize()
        if before is not None:
            before()
        if ahead is not None and timed_run >= 0:
            ahead(timed_run)
        runs += 1

    def timed() -> float:
        start.record()
        run()
        end.record()
        end.synchronize()
        return float(cp.cuda.get_elapsed_time(start, end))

    return repeat_timed(timed, settings, prepare, warmup=run)


class GpuMeasurer:
    """Measures configs of one workload on one device; built in the worker process."""

    def __init__(self, spec: MeasureSpec, device: int) -> None:
        import cupy as cp

        from ktune.tuner.measure.detect import device_spec

        self.cp = cp
        cp.cuda.Device(device).use()
        self.device = device
        self.spec = spec
        self.info = device_spec(device)
        op = spec.operator
        self.op: Operator = get_operator(op) if isinstance(op, str) else op
        self.workload = Workload.from_key(spec.workload_key)
        host = self.op.arguments(self.workload, np.random.default_rng(spec.seed))
        self.args = [cp.asarray(v) if isinstance(v, np.ndarray) else v for v in host.values]
        self.outputs = host.outputs
        # kernels of ktune's operators take their sizes after the data, as ints
        self.sizes = self.op.kernel_sizes(self.workload)
        self.pristine = {i: self.args[i].copy() for i in self.outputs}
        refs = self.op.reference(self.workload, host, xp=cp)
        self.references = dict(zip(self.outputs, refs))
        self.tolerance = self.op.tolerance(self.workload)
        self.constants: dict[str, np.ndarray] = dict(getattr(self.op, "constant_memory", {}) or {})
        self._modules: dict[tuple[str, tuple[str, ...]], Any] = {}
        cp.cuda.Device().synchronize()

    def hello(self) -> dict[str, Any]:
        return self.info

    def __call__(self, config: Config) -> dict[str, Any] | WorkerReply:
        cp = self.cp
        result: dict[str, Any] = {
            "status": "ok",
            "time_ms": None,
            "times_ms": [],
            "compile_ms": 0.0,
            "bench_ms": 0.0,
            "error": "",
            "extra": {},
        }
        source = self.op.render(config, self.workload)
        launch = self.op.launch(config, self.workload)
        started = time.perf_counter()
        try:
            kernel = self._compile(source.code, source.options, source.name)
        except Exception as exc:  # noqa: BLE001 - CompileException and friends: a compile error
            result.update(status="compile_error", error=error_text(str(exc)))
            result["compile_ms"] = (time.perf_counter() - started) * 1000
            return result
        result["compile_ms"] = (time.perf_counter() - started) * 1000
        attrs = _attributes(kernel)
        result["extra"] = {
            "registers": attrs["registers"],
            "static_smem_bytes": attrs["shared"],
            "local_bytes": attrs["local"],
        }
        problem = self._launch_problem(launch, attrs, kernel)
        if problem:
            result.update(status="runtime_error", error=f"cannot launch: {problem}")
            return result
        args = (*self.args, *self.sizes)

        def run() -> None:
            kernel(launch.grid, launch.block, args, shared_mem=launch.shared_mem)

        def restore() -> None:
            for i, p in self.pristine.items():
                self.args[i][...] = p

        bench = time.perf_counter()
        try:
            restore()
            run()
            cp.cuda.Device().synchronize()
            worst = self._check()
            result["extra"]["max_error_ratio"] = worst
            if worst > 1.0:
                result.update(status="wrong_result", error=self.tolerance.failure(worst))
            else:
                times = time_gpu(
                    run, self.spec.settings, restore, int(self.info.get("l2_bytes", 0))
                )
                result.update(times_ms=times, time_ms=float(np.median(times)))
        except cp.cuda.runtime.CUDARuntimeError as exc:
            return self._cuda_failure(result, exc)
        except cp.cuda.driver.CUDADriverError as exc:
            return self._cuda_failure(result, exc)
        finally:
            result["bench_ms"] = (time.perf_counter() - bench) * 1000
        return result

    # --- internals

    def _compile(self, code: str, options: tuple[str, ...], name: str) -> Any:
        key = (code, options)
        module = self._modules.get(key)
        if module is None:
            module = self.cp.RawModule(code=code, options=options, backend="nvrtc")
            self._modules[key] = module
        kernel = module.get_function(name)  # compiles (NVRTC) on first use
        for cname, data in self.constants.items():
            ptr = module.get_global(cname)
            view = self.cp.ndarray(data.shape, data.dtype, ptr)
            view[...] = self.cp.asarray(data)
        return kernel

    def _launch_problem(self, launch: Any, attrs: dict[str, int], kernel: Any) -> str | None:
        if launch.threads_per_block > attrs["max_threads"]:
            return (
                f"{launch.threads_per_block} threads per block > {attrs['max_threads']} "
                f"(the kernel uses {attrs['registers']} registers)"
            )
        if launch.shared_mem > 48 * 1024:
            optin = int(self.info.get("shared_mem_per_block_optin", 0))
            if attrs["shared"] + launch.shared_mem > optin:
                return f"{attrs['shared'] + launch.shared_mem} bytes of shared memory > {optin}"
        return None if launch.shared_mem == 0 else _set_dynamic_smem(kernel, launch.shared_mem)

    def _check(self) -> float:
        worst = 0.0
        for i, ref in self.references.items():
            if ref is None:
                continue
            _, ratio = self.tolerance.check(self.args[i], ref, xp=self.cp)  # on the device
            worst = max(worst, ratio)
        return worst

    def _cuda_failure(self, result: dict[str, Any], exc: Exception) -> WorkerReply:
        text = str(exc)
        result.update(status="runtime_error", error=error_text(text), time_ms=None, times_ms=[])
        sticky = not any(code in text for code in _RECOVERABLE) or not self._healthy()
        return WorkerReply(result, restart=sticky)

    def _healthy(self) -> bool:
        try:
            self.cp.cuda.Device().synchronize()
            self.cp.zeros(1).sum().item()
            return True
        except Exception:  # noqa: BLE001 - any failure means the context is gone
            return False


def _attributes(kernel: Any) -> dict[str, int]:
    """The compiled kernel's resources, from ``RawKernel.attributes`` (the CUDA function
    attributes of the current device; a ``RawKernel`` has no handle of its own to pass to the
    driver)."""
    attrs = kernel.attributes
    return {
        "max_threads": int(attrs["max_threads_per_block"]),
        "shared": int(attrs["shared_size_bytes"]),
        "local": int(attrs["local_size_bytes"]),
        "registers": int(attrs["num_regs"]),
    }


def _set_dynamic_smem(kernel: Any, size: int) -> str | None:
    try:  # the opt-in above 48 KiB; CUDA refuses more than the device's per-block maximum
        kernel.max_dynamic_shared_size_bytes = size
    except Exception as exc:  # noqa: BLE001 - the device refuses that much dynamic smem
        return f"{size} bytes of dynamic shared memory refused: {exc}"
    return None
