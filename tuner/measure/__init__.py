"""Measurement backends: what turns a config into a time.

``replay`` answers from a recorded (brute-forced) space; ``cupy_backend`` compiles with NVRTC
and times with CUDA events on an NVIDIA GPU, checking each result against a reference, through
a pool of local worker processes (``pool``, ``worker``) or of actors on the GPUs of a Ray
cluster (``ray_pool``); ``static`` compiles without a GPU to learn registers and spills;
``fake`` wraps a Python function (tests); ``detect`` finds the local GPU.
"""

from __future__ import annotations

from ktune.tuner.measure.base import Backend, BackendError, Measurement, Status

__all__ = ["Backend", "BackendError", "Measurement", "Status"]
