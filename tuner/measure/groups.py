"""Measuring processes and the compilers they start die with their job.

A measuring worker (``ktune.tuner.measure.pool``) calls :func:`become_group_leader` first: it
leads a process group of its own, so the pool kills it and everything it started at once
(:func:`kill_group`), and a watchdog thread ends the group when the process that started the
worker is gone (``kill -9`` of ``ktune tune`` or ``ktune worker``): a hung kernel never keeps
running past its job, spoiling the timings of the job's next runner.

Compilers run through :func:`run_in_group`: in a process group of their own, so a timeout kills
the driver and the compiler proper, assembler and linker it started; the group is registered,
so that a worker ending by SIGTERM or by its watchdog kills it too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from types import FrameType

__all__ = ["become_group_leader", "kill_group", "run_in_group"]

#: process groups of the commands this process is running (compilers), killed when it ends
_children: set[int] = set()
_lock = threading.Lock()


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to every process of the group ``pgid``; nothing if it is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _end(code: int) -> None:
    """Kill the registered command groups, then this process's whole group (itself last)."""
    with _lock:
        groups = list(_children)
    for pgid in groups:
        kill_group(pgid)
    kill_group(os.getpgid(0))
    os._exit(code)


def _on_term(signum: int, frame: FrameType | None) -> None:
    _end(128 + signum)


def _watch(parent: int, period_s: float) -> None:
    while True:
        time.sleep(period_s)
        if os.getppid() != parent:  # the parent died; this process was re-parented
            _end(1)


def become_group_leader(period_s: float = 0.2) -> None:
    """In a new worker process: lead a new session and process group, end it on SIGTERM,
    and end it when the parent process is gone (checked every ``period_s``)."""
    parent = os.getppid()
    try:
        os.setsid()
    except OSError:  # already a group leader
        pass
    signal.signal(signal.SIGTERM, _on_term)
    threading.Thread(
        target=_watch, args=(parent, period_s), name="ktune-parent-watch", daemon=True
    ).start()


def run_in_group(command: Sequence[str], *, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a process group of its own and capture its output (text); on
    timeout kill the whole group and raise ``subprocess.TimeoutExpired``."""
    process = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    with _lock:
        _children.add(process.pid)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except BaseException:
        kill_group(process.pid)
        process.communicate()
        raise
    finally:
        with _lock:
            _children.discard(process.pid)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)
