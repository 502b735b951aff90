"""Which job backends this installation can run at all (``ktune worker``, the runner)."""

from __future__ import annotations

import importlib.util

from ktune.tuner.sources.options import BACKENDS

__all__ = ["backend_unavailable", "runnable_backends"]


def backend_unavailable(name: str) -> str | None:
    """Why this installation cannot run jobs of backend ``name`` at all, or None. (A ``cupy``
    job may still find no GPU here; that is the job's error, found when it starts.)"""
    if name == "ray" and importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install 'ktune[ray]')"
    if name == "cpu":
        from ktune.tuner.measure.cpu_backend import compiler_unavailable

        return compiler_unavailable()
    return None


def runnable_backends() -> tuple[str, ...]:
    """The backends a runner takes when told none: those this installation can run."""
    return tuple(b for b in BACKENDS if backend_unavailable(b) is None)
