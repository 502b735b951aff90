"""Worker processes that run measurements where a crash, a hang or a poisoned device cannot
take the job down with them.

A :class:`WorkerPool` keeps one child process per slot (one per GPU for the CuPy backend). In
the child, ``factory(slot)`` builds the measurement function once (it holds the CUDA context,
the device buffers, the compile cache); each task is then a call of it. The parent waits for
each answer with a timeout:

- a function that raises: the error comes back as a value, the worker stays;
- a worker that dies (``os._exit``, a segfault, the OOM killer): ``crashed``, a new worker;
- no answer in time (a kernel that never ends): the worker is killed, ``timeout``, a new one;
  each worker leads a process group of its own, killed whole, and ends it when the pool's
  process is gone (``ktune.tuner.measure.groups``): no measuring process outlives its job;
- an answer wrapped in :class:`WorkerReply` with ``restart=True`` (a sticky CUDA error such as
  an illegal address leaves the context unusable): the answer is kept, the worker replaced.

Children are started with ``spawn``, so the parent never initialises CUDA and factories must
be picklable (module-level functions, ``functools.partial`` of them).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal, Self

from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.groups import become_group_leader, kill_group

__all__ = [
    "PoolError",
    "SlotPool",
    "TaskResult",
    "WorkerPool",
    "WorkerReply",
    "call_function",
    "start_function",
]

Factory = Callable[[int], Callable[[Any], Any]]


class PoolError(BackendError):
    """A worker cannot be started at all (no device, the factory fails): the job cannot go on."""


@dataclass(frozen=True)
class WorkerReply:
    """What a measurement function returns to ask for its worker to be replaced afterwards."""

    value: Any
    restart: bool = False


@dataclass(frozen=True)
class TaskResult:
    status: Literal["ok", "error", "crashed", "timeout"]
    value: Any = None
    error: str = ""
    seconds: float = 0.0
    restarted: bool = False  # the worker was replaced after this task


def start_function(
    factory: Factory, slot: int
) -> tuple[Callable[[Any], Any] | None, tuple[str, Any]]:
    """In a worker: build ``factory(slot)``'s function and its ``hello``. Returns the function
    and ``("ready", hello)``, or ``None`` and ``("init_error", reason)``."""
    try:
        fn = factory(slot)
        return fn, ("ready", fn.hello() if hasattr(fn, "hello") else None)
    except BaseException as exc:  # noqa: BLE001 - reported to the pool, which raises
        return None, ("init_error", f"{type(exc).__name__}: {exc}")


def call_function(fn: Callable[[Any], Any], task: Any) -> tuple[str, Any]:
    """In a worker: ``("ok", fn(task))``, or ``("error", reason)`` when it raises."""
    try:
        return ("ok", fn(task))
    except BaseException as exc:  # noqa: BLE001 - an error of one task, as a value
        return ("error", f"{type(exc).__name__}: {exc}")


def _child(conn: Connection, factory: Factory, slot: int) -> None:
    become_group_leader()  # dies with the pool's process, kills what it starts
    fn, hello = start_function(factory, slot)
    conn.send(hello)
    if fn is None:
        return
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(call_function(fn, task))


class _Worker:
    def __init__(self, ctx: Any, factory: Factory, slot: int, start_timeout_s: float) -> None:
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(
            target=_child,
            args=(child_conn, factory, slot),
            daemon=True,
            name=f"ktune-worker-{slot}",
        )
        self.process.start()
        child_conn.close()
        if not self.conn.poll(start_timeout_s):
            self.kill()
            raise PoolError(f"worker {slot} did not start within {start_timeout_s:g} s")
        try:
            kind, payload = self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            raise PoolError(
                f"worker {slot} died while starting (exit code {self.process.exitcode})"
            ) from None
        if kind != "ready":
            self.kill()
            raise PoolError(f"worker {slot} cannot start: {payload}")
        self.hello = payload

    @property
    def pid(self) -> int | None:
        pid = self.process.pid
        return None if pid is None else int(pid)

    def kill(self) -> None:
        """Kill the worker and every process it started (its group): a compiler it runs
        gets SIGTERM's cleanup, a kernel that holds it gets SIGKILL after a moment."""
        pid = self.pid
        if pid is not None and self.process.is_alive():
            kill_group(pid, signal.SIGTERM)
            self.process.join(0.5)
            kill_group(pid)
        self.process.join(10)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(5)
        self.kill()


class SlotPool(ABC):
    """Workers by slot, each running a measurement function on tasks one at a time: the
    interface of :class:`WorkerPool` (local child processes) and of
    :class:`~ktune.tuner.measure.ray_pool.RayWorkerPool` (actors on a Ray cluster)."""

    def __init__(self, slots: Sequence[int], timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout must be > 0, got {timeout_s}")
        self.slots = list(slots)
        if not self.slots:
            raise ValueError("a worker pool needs at least one slot")
        self.timeout_s = timeout_s
        self._locks = {s: threading.Lock() for s in self.slots}
        self.restarts = 0
        self._closed = False

    def hello(self, slot: int | None = None) -> Any:
        """What the slot's function reported when it started (``fn.hello()``), starting it."""
        slot = self.slots[0] if slot is None else slot
        with self._locks[slot]:
            return self._hello(slot)

    def run(
        self, task: Any, slot: int | None = None, *, timeout_s: float | None = None
    ) -> TaskResult:
        """Run one task on ``slot`` (the first by default) and wait for its answer."""
        slot = self.slots[0] if slot is None else slot
        with self._locks[slot]:
            return self._run(slot, task, self.timeout_s if timeout_s is None else timeout_s)

    def map(self, tasks: Sequence[Any]) -> list[TaskResult]:
        """Run ``tasks`` spread over the slots (in parallel across slots), results in order."""
        if len(self.slots) == 1 or len(tasks) <= 1:
            return [self.run(t) for t in tasks]
        results: list[TaskResult | None] = [None] * len(tasks)

        def drain(k: int) -> None:
            for i in range(k, len(tasks), len(self.slots)):
                results[i] = self.run(tasks[i], self.slots[k])

        threads = [threading.Thread(target=drain, args=(k,)) for k in range(len(self.slots))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [r for r in results if r is not None]

    @abstractmethod
    def close(self) -> None:
        """Stop every worker; the pool cannot be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def _hello(self, slot: int) -> Any:
        """The slot's ``hello``, starting its worker if need be (slot lock held)."""

    @abstractmethod
    def _run(self, slot: int, task: Any, timeout_s: float) -> TaskResult:
        """One task on ``slot`` (slot lock held); failures are statuses, not exceptions."""

    @abstractmethod
    def _replace(self, slot: int) -> None:
        """Kill the slot's worker (a new one starts with the next task); count the restart."""

    def _answer(self, slot: int, kind: str, payload: Any, seconds: float) -> TaskResult:
        """The result of a task whose worker answered ``(kind, payload)``: an error as a value,
        a :class:`WorkerReply` asking for a restart replaces the worker after its answer."""
        if kind == "error":
            return TaskResult("error", error=str(payload), seconds=seconds)
        if isinstance(payload, WorkerReply):
            if payload.restart:
                self._replace(slot)
            return TaskResult("ok", payload.value, seconds=seconds, restarted=payload.restart)
        return TaskResult("ok", payload, seconds=seconds)


class WorkerPool(SlotPool):
    """One child process per slot, each running ``factory(slot)``'s function on tasks."""

    def __init__(
        self,
        factory: Factory,
        *,
        slots: int | Sequence[int] = 1,
        timeout_s: float = 30.0,
        start_timeout_s: float = 300.0,
    ) -> None:
        super().__init__(list(range(slots)) if isinstance(slots, int) else slots, timeout_s)
        self.factory = factory
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._workers: dict[int, _Worker | None] = {s: None for s in self.slots}

    def pid(self, slot: int | None = None) -> int | None:
        worker = self._workers[self.slots[0] if slot is None else slot]
        return worker.pid if worker is not None else None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for slot, worker in self._workers.items():
            if worker is not None:
                worker.stop()
            self._workers[slot] = None

    # --- internals

    def _hello(self, slot: int) -> Any:
        return self._worker(slot).hello

    def _worker(self, slot: int) -> _Worker:
        if self._closed:
            raise PoolError("the worker pool is closed")
        worker = self._workers[slot]
        if worker is None or not worker.process.is_alive():
            if worker is not None:
                worker.kill()
            worker = self._workers[slot] = _Worker(
                self._ctx, self.factory, slot, self.start_timeout_s
            )
        return worker

    def _replace(self, slot: int) -> None:
        worker = self._workers[slot]
        if worker is not None:
            worker.kill()
        self._workers[slot] = None  # started again on the next task
        self.restarts += 1

    def _run(self, slot: int, task: Any, timeout_s: float) -> TaskResult:
        worker = self._worker(slot)
        started = time.perf_counter()
        try:
            worker.conn.send(task)
        except (OSError, ValueError) as exc:
            self._replace(slot)
            return TaskResult(
                "crashed", error=f"worker lost before the task: {exc}", restarted=True
            )
        if not worker.conn.poll(timeout_s):
            self._replace(slot)
            return TaskResult(
                "timeout",
                error=f"no answer within {timeout_s:g} s; worker killed",
                seconds=time.perf_counter() - started,
                restarted=True,
            )
        try:
            kind, payload = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(5)
            code = worker.process.exitcode
            self._replace(slot)
            return TaskResult(
                "crashed",
                error=f"worker process died (exit code {code})",
                seconds=time.perf_counter() - started,
                restarted=True,
            )
        return self._answer(slot, kind, payload, time.perf_counter() - started)
