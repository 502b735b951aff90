"""Where a job's search space and measurements come from: its source.

One module per job::

    base         the Source protocol, SourceError, what measured sources share
    options      the typed options of each kind of source, to and from a job's JSON
    factory      request -> options -> source: the one way every front end opens a source
    replay       ReplaySource: a recorded space replayed (no device)
    gpu          GpuSource: an operator or a T1 kernel on a local GPU or a Ray cluster's
    cpu          CpuSource: a CPU operator on this machine
    environment  where sources find recordings, GPUs and the CPU (replaceable)
    recordings   the bundled recordings, and names to paths
    probes       which backends this installation can run

The names below are the package's surface; import them from here.
"""

from __future__ import annotations

from ktune.tuner.sources.base import MeasuredSource, Source, SourceError, SourceOptions
from ktune.tuner.sources.cpu import CpuSource, local_cpu
from ktune.tuner.sources.environment import Environment
from ktune.tuner.sources.factory import (
    SourceKind,
    SourceRequest,
    kind_of,
    open_demo,
    open_source,
    request_options,
)
from ktune.tuner.sources.gpu import GpuSource
from ktune.tuner.sources.options import (
    BACKENDS,
    AnyOptions,
    CpuOptions,
    CustomOptions,
    GpuOptions,
    JobOptions,
    RayOptions,
    ReplayOptions,
    options_from_json,
)
from ktune.tuner.sources.probes import backend_unavailable, runnable_backends
from ktune.tuner.sources.recordings import bundled_recordings, resolve_recording
from ktune.tuner.sources.replay import ReplaySource

__all__ = [
    "BACKENDS",
    "AnyOptions",
    "CpuOptions",
    "CpuSource",
    "CustomOptions",
    "Environment",
    "GpuOptions",
    "GpuSource",
    "JobOptions",
    "MeasuredSource",
    "RayOptions",
    "ReplayOptions",
    "ReplaySource",
    "Source",
    "SourceError",
    "SourceKind",
    "SourceOptions",
    "SourceRequest",
    "backend_unavailable",
    "bundled_recordings",
    "kind_of",
    "local_cpu",
    "open_demo",
    "open_source",
    "options_from_json",
    "request_options",
    "resolve_recording",
    "runnable_backends",
]
