"""GPU workers on a Ray cluster: measurements beyond one machine.

A :class:`RayWorkerPool` is a :class:`~ktune.tuner.measure.pool.SlotPool` whose workers are Ray
actors instead of local child processes: one actor per slot, each holding one GPU of the
cluster (``num_gpus=1``; Ray sets ``CUDA_VISIBLE_DEVICES``, so the actor builds
``factory(0)``), on a node of the requested accelerator type when one is given
(``gpu_type="H100"``: Ray's ``accelerator_type``, which it detects on every NVIDIA node). The
isolation contract is the local pool's:

- a function that raises: the error comes back as a value, the actor stays;
- an actor that dies (``os._exit``, a segfault, its node lost): ``crashed``, a new actor;
- no answer in time (a kernel that never ends): the actor is killed, ``timeout``, a new one;
- an answer wrapped in :class:`~ktune.tuner.measure.pool.WorkerReply` with ``restart=True`` (a
  sticky CUDA error): the answer is kept, the actor replaced.

Every node must have ktune installed (``pip install 'ktune[gpu,ray]'``): actors import the
measurement code from there, the driver sends only the factory (pickled by reference).
:func:`connect` joins the cluster once per process; a pool never shuts Ray down, it kills only
its own actors.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Any

from ktune.tuner.bounds import MAX_RAY_WORKERS
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.pool import (
    Factory,
    PoolError,
    SlotPool,
    TaskResult,
    call_function,
    start_function,
)

__all__ = [
    "ADDRESS_ENV",
    "START_TIMEOUT_S",
    "RayPlacement",
    "RayWorkerPool",
    "cluster_gpus",
    "connect",
    "detect_device",
]

#: the environment variable that overrides a job's stored Ray address (a worker that reaches
#: the cluster by another address than the machine that created the job)
ADDRESS_ENV = "KTUNE_RAY_ADDRESS"
#: how long a job waits for the cluster to offer a GPU (an autoscaler may be starting a node)
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class RayPlacement:
    """Where a job's measurements run on a Ray cluster.

    ``address``: what ``ray.init`` joins (``auto``: the cluster this node belongs to;
    ``ray://host:10001``: a remote one; ``local``: this machine's Ray, started if none runs).
    ``workers``: actors measuring in parallel (one GPU each; a batch is spread over them).
    ``gpu_type``: Ray accelerator type the actors must run on (``H100``, ``A100``, ...), so
    that every measurement of a job is taken on the same kind of GPU. ``num_gpus``: GPUs per
    actor (0 only to run planted functions on a cluster without GPUs, as the tests do)."""

    address: str = "auto"
    workers: int = 1
    gpu_type: str | None = None
    num_gpus: float = 1.0

    def __post_init__(self) -> None:
        if not self.address.strip():
            raise ValueError("the Ray address is empty (auto, local or ray://host:port)")
        if len(self.address) > 500 or len(self.gpu_type or "") > 100:
            what = "address" if len(self.address) > 500 else "GPU type"
            raise ValueError(f"the Ray {what} is too long (500 and 100 characters at most)")
        if not 1 <= self.workers <= MAX_RAY_WORKERS:
            raise ValueError(f"Ray workers must be 1..{MAX_RAY_WORKERS}, got {self.workers}")
        if self.gpu_type is not None and not self.gpu_type.strip():
            raise ValueError("the GPU type is empty (a Ray accelerator type such as H100)")
        if not 0 <= self.num_gpus <= 8:
            raise ValueError(f"GPUs per Ray worker must be 0..8, got {self.num_gpus}")

    def to_options(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RayPlacement:
        """The placement stored with a job; ``$KTUNE_RAY_ADDRESS`` overrides its address."""
        data = dict(options)
        data["address"] = os.environ.get(ADDRESS_ENV) or data.get("address", "auto")
        return cls(**data)

    def actor_options(self) -> dict[str, Any]:
        """Ray scheduling options of one worker and of the device probe (an actor that dies
        is not restarted by Ray, whose default that is: the pool replaces it)."""
        out: dict[str, Any] = {"num_gpus": self.num_gpus}
        if self.gpu_type:
            out["accelerator_type"] = self.gpu_type
        return out

    def describe(self) -> str:
        kind = f"a GPU of type {self.gpu_type}" if self.gpu_type else "a GPU"
        return f"{kind} on the Ray cluster at {self.address}"


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PoolError(
            "Ray is not installed: pip install 'ktune[ray]' (on this machine and on every node)"
        ) from None
    return ray


_CONNECT_LOCK = threading.Lock()
#: calls to run on the thread that starts this machine's Ray (see :func:`_on_lasting_thread`)
_LASTING_CALLS: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_LASTING_THREAD: threading.Thread | None = None


def _serve_lasting_calls() -> None:
    while True:
        fn, done = _LASTING_CALLS.get()
        try:
            done.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who re-raises it
            done.set_exception(exc)


def _on_lasting_thread(fn: Callable[[], Any]) -> Any:
    """``fn()``, run on a thread that lasts as long as the process.

    Ray starts this machine's Ray (GCS, raylet, ...) with ``PR_SET_PDEATHSIG``, which the
    kernel fires when the *thread* that started a process ends. Started from a runner slot's
    thread, the local Ray was killed as that job's thread ended, and the next call into it hung
    for a minute and then ended the whole process. Called with ``_CONNECT_LOCK`` held."""
    global _LASTING_THREAD
    if threading.current_thread() is threading.main_thread():
        return fn()
    if _LASTING_THREAD is None:
        _LASTING_THREAD = threading.Thread(
            target=_serve_lasting_calls, name="ktune-ray-local", daemon=True
        )
        _LASTING_THREAD.start()
    done: Future[Any] = Future()
    _LASTING_CALLS.put((fn, done))
    return done.result()


def connect(address: str) -> Any:
    """The ``ray`` module, joined to the cluster at ``address`` (once per process; a runner's
    slots may start jobs at the same moment, so the first one joins and the others wait)."""
    ray = _ray()
    with _CONNECT_LOCK:
        if not ray.is_initialized():
            try:
                init = functools.partial(_init, ray, address)
                if address == "local":  # this machine's Ray, started here
                    _on_lasting_thread(init)
                else:
                    init()
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ... from ray
                raise PoolError(
                    f"cannot join the Ray cluster at {address}: {type(exc).__name__}: {exc}"
                ) from None
    return ray


def _init(ray: Any, address: str) -> None:
    with warnings.catch_warnings():  # Ray's client warns, then raises what it warned of
        warnings.simplefilter("ignore")
        ray.init(
            address=None if address == "local" else address,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )


def cluster_gpus(ray: Any) -> str:
    """What GPUs the joined cluster has now, for error messages: ``"6 GPUs (types: A100, L4)"``
    (Ray marks each node with its accelerator type, once per node, so types are not counted)."""
    try:
        resources = ray.cluster_resources()
    except Exception:  # noqa: BLE001 - only a hint
        return "unknown GPUs"
    gpus = resources.get("GPU", 0)
    if not gpus:
        return "no GPUs"
    kinds = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
    return f"{gpus:g} GPUs" + (f" (types: {', '.join(kinds)})" if kinds else "")


class _Actor:
    """The body of one Ray worker: builds the measurement function once, then runs tasks."""

    def __init__(self, factory: Factory) -> None:
        self.fn, self.started = start_function(factory, 0)

    def hello(self) -> tuple[str, Any]:
        return self.started

    def call(self, task: Any) -> tuple[str, Any]:
        assert self.fn is not None  # the pool runs tasks only on actors that started
        return call_function(self.fn, task)


class RayWorkerPool(SlotPool):
    """One Ray actor per slot (``placement.workers`` of them), each running ``factory(0)``'s
    function on its own GPU of the cluster."""

    def __init__(
        self,
        factory: Factory,
        placement: RayPlacement,
        *,
        timeout_s: float = 30.0,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        super().__init__(range(placement.workers), timeout_s)
        self.factory = factory
        self.placement = placement
        self.start_timeout_s = start_timeout_s
        self._ray = connect(placement.address)
        self._actor_class = self._ray.remote(_Actor)
        self._actors: dict[int, tuple[Any, Any] | None] = {
            s: None for s in self.slots
        }  # (handle, hello)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for slot in self.slots:
            self._kill(slot)

    # --- internals

    def _hello(self, slot: int) -> Any:
        return self._actor(slot)[1]

    def _actor(self, slot: int) -> tuple[Any, Any]:
        if self._closed:
            raise PoolError("the worker pool is closed")
        entry = self._actors[slot]
        if entry is None:
            handle = self._actor_class.options(**self.placement.actor_options()).remote(
                self.factory
            )
            ready, _ = self._ray.wait([handle.hello.remote()], timeout=self.start_timeout_s)
            if not ready:
                self._ray.kill(handle, no_restart=True)
                raise PoolError(
                    f"no Ray node started worker {slot} within {self.start_timeout_s:g} s: "
                    f"the cluster at {self.placement.address} has no free {self._wanted()} "
                    f"(it has {cluster_gpus(self._ray)})"
                )
            try:
                kind, payload = self._ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - the actor died while starting
                self._ray.kill(handle, no_restart=True)
                raise PoolError(f"Ray worker {slot} died while starting: {_reason(exc)}") from None
            if kind != "ready":
                self._ray.kill(handle, no_restart=True)
                raise PoolError(f"Ray worker {slot} cannot start: {payload}")
            entry = self._actors[slot] = (handle, payload)
        return entry

    def _wanted(self) -> str:
        p = self.placement
        gpu = f"{p.gpu_type} GPU" if p.gpu_type else "GPU"
        return f"{gpu} ({p.num_gpus:g} per worker)" if p.num_gpus else "worker slot"

    def _kill(self, slot: int) -> None:
        entry = self._actors[slot]
        self._actors[slot] = None
        if entry is not None:
            with contextlib.suppress(Exception):  # already gone with its node
                self._ray.kill(entry[0], no_restart=True)

    def _replace(self, slot: int) -> None:
        self._kill(slot)  # started again on the next task
        self.restarts += 1

    def _run(self, slot: int, task: Any, timeout_s: float) -> TaskResult:
        handle, _ = self._actor(slot)
        started = time.perf_counter()
        ref = handle.call.remote(task)
        ready, _ = self._ray.wait([ref], timeout=timeout_s)
        if not ready:
            self._replace(slot)
            return TaskResult(
                "timeout",
                error=f"no answer within {timeout_s:g} s; Ray worker killed",
                seconds=time.perf_counter() - started,
                restarted=True,
            )
        try:
            kind, payload = self._ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - RayActorError and kin: the actor is gone
            self._replace(slot)
            return TaskResult(
                "crashed",
                error=f"Ray worker died: {_reason(exc)}",
                seconds=time.perf_counter() - started,
                restarted=True,
            )
        return self._answer(slot, kind, payload, time.perf_counter() - started)


def _reason(exc: BaseException) -> str:
    """The first line of a Ray exception (its full text is a multi-line report)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _probe() -> dict[str, Any]:
    from ktune.tuner.measure.detect import device_spec

    return device_spec(0)


def detect_device(placement: RayPlacement, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
    """The spec of a GPU the placement's workers would get (one Ray task on such a GPU)."""
    ray = connect(placement.address)
    ref = ray.remote(_probe).options(**placement.actor_options()).remote()
    ready, _ = ray.wait([ref], timeout=timeout_s)
    if not ready:
        ray.cancel(ref, force=True)
        raise BackendError(
            f"no CUDA device: no Ray node offered {placement.describe()} within {timeout_s:g} s "
            f"(it has {cluster_gpus(ray)})"
        )
    try:
        return dict(ray.get(ready[0]))
    except Exception as exc:  # noqa: BLE001 - CuPy missing there, no driver, ...
        raise BackendError(f"no CUDA device on the Ray node: {_reason(exc)}") from None
