"""What the local NVIDIA GPUs are: a device-spec dict per device, read through CuPy.

The dict holds every field of the cost model's ``DeviceSpec`` (``DeviceSpec.from_dict`` takes
it: SM count, clocks, memory bandwidth, L2, shared memory and registers per SM and block, thread
limits, warp size, nominal peak FP32 and FP16 tensor rates), so a worker's device can be
embedded like a catalog one; a few byte-sized extras and the CUDA versions follow.
:func:`detect_devices` runs the query in a short-lived child process, so the caller never holds
a CUDA context of its own.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
from typing import Any

from ktune.tuner.measure.base import BackendError

__all__ = ["cuda_unavailable", "detect_devices", "device_spec"]

# CUDA cores (FP32 lanes) per SM and dense FP16 tensor-core FLOPs per clock per SM, by compute
# capability (NVIDIA's architecture whitepapers; 8.6/8.9 are the professional cards' rates).
_FP32_LANES = {
    (7, 0): 64,
    (7, 5): 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128,
    (12, 0): 128,
}
_FP16_TENSOR = {
    (7, 0): 1024,
    (7, 5): 1024,
    (8, 0): 2048,
    (8, 6): 1024,
    (8, 7): 1024,
    (8, 9): 1024,
    (9, 0): 4096,
    (10, 0): 8192,
    (12, 0): 1024,
}
_ARCH = {7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}

# cudaDeviceAttr numbers (stable across CUDA versions)
_ATTR = {
    "clock_khz": 13,
    "memory_clock_khz": 36,
    "bus_width_bits": 37,
    "l2_bytes": 38,
    "max_threads_per_sm": 39,
    "shared_mem_per_sm": 81,
    "registers_per_sm": 82,
    "shared_mem_per_block_optin": 97,
    "max_blocks_per_sm": 106,
}


def cuda_unavailable() -> str | None:
    """Why no GPU can be used from here without starting anything (CuPy missing), or None."""
    if importlib.util.find_spec("cupy") is None:
        return "no CUDA device: CuPy is not installed (pip install 'ktune[gpu]')"
    return None


def device_spec(index: int = 0) -> dict[str, Any]:
    """The spec of CUDA device ``index`` (initialises CUDA in this process)."""
    import cupy as cp

    rt = cp.cuda.runtime
    props = rt.getDeviceProperties(index)

    def attr(name: str) -> int:
        return int(rt.deviceGetAttribute(_ATTR[name], index))

    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    cc = (int(props["major"]), int(props["minor"]))
    sms = int(props["multiProcessorCount"])
    clock_mhz = attr("clock_khz") / 1000.0
    mem_mhz = attr("memory_clock_khz") / 1000.0
    bus = attr("bus_width_bits")
    fp32 = _FP32_LANES.get(cc, _FP32_LANES.get((cc[0], 0), 128))
    fp16 = _FP16_TENSOR.get(cc, _FP16_TENSOR.get((cc[0], 0), 1024))
    kib = 1.0 / 1024
    return {  # the fields of cost_model.devices.DeviceSpec, then byte-sized extras
        "name": name,
        "vendor": "NVIDIA",
        "architecture": _ARCH.get(cc[0], f"sm_{cc[0]}{cc[1]}"),
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "sm_count": sms,
        "fp32_lanes_per_sm": fp32,
        "boost_clock_mhz": clock_mhz,
        "memory_bandwidth_gbs": 2.0 * mem_mhz * 1e6 * bus / 8 / 1e9,
        "memory_gb": int(props["totalGlobalMem"]) / 1e9,
        "l2_cache_kib": attr("l2_bytes") * kib,
        "shared_memory_per_sm_kib": attr("shared_mem_per_sm") * kib,
        "shared_memory_per_block_kib": int(props["sharedMemPerBlock"]) * kib,
        "shared_memory_per_block_optin_kib": attr("shared_mem_per_block_optin") * kib,
        "registers_per_sm": attr("registers_per_sm"),
        "registers_per_block": int(props["regsPerBlock"]),
        "max_threads_per_sm": attr("max_threads_per_sm"),
        "max_blocks_per_sm": attr("max_blocks_per_sm"),
        "max_threads_per_block": int(props["maxThreadsPerBlock"]),
        "warp_size": int(props["warpSize"]),
        "peak_fp32_tflops": sms * fp32 * 2 * clock_mhz / 1e6,
        "peak_fp16_tflops": sms * fp16 * clock_mhz / 1e6,
        "source": "detected by ktune through CuPy; peaks are nominal (lanes x clock)",
        "l2_bytes": attr("l2_bytes"),
        "shared_mem_per_block_optin": attr("shared_mem_per_block_optin"),
        "memory_clock_mhz": mem_mhz,
        "memory_bus_width_bits": bus,
        "cuda_runtime": int(rt.runtimeGetVersion()),
        "cuda_driver": int(rt.driverGetVersion()),
    }


def _probe(conn: Any) -> None:
    try:
        import cupy as cp

        n = cp.cuda.runtime.getDeviceCount()
        conn.send(("ok", [device_spec(i) for i in range(n)]))
    except Exception as exc:  # noqa: BLE001 - reported as the reason there is no device
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def detect_devices(timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Specs of every local CUDA device; :class:`BackendError` with the reason when none."""
    reason = cuda_unavailable()
    if reason:
        raise BackendError(reason)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_probe, args=(child,), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            raise BackendError(
                f"no CUDA device: the device query did not answer within {timeout_s:g} s"
            )
        kind, payload = parent.recv()
    except EOFError:
        raise BackendError("no CUDA device: the device query crashed") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
    if kind != "ok":
        raise BackendError(f"no CUDA device: {payload}")
    if not payload:
        raise BackendError("no CUDA device: CuPy sees none")
    return list(payload)
