"""CUDA kernels run on the CPU, for correctness only (never for timing).

A kernel's own source, rendered for a config exactly as for NVRTC, is compiled by g++ against
an emulation of CUDA's built-ins (:mod:`.translate`, :mod:`.build`, ``runtime/``) and run with
the threads of each block as fibers, with bounds, alignment and shared-memory race checks
(:mod:`.launch`); :func:`check_config` compares the result with the operator's reference.
"""

from __future__ import annotations

from ktune.tuner.measure.emulate.build import CompileError, EmulatedKernel, compile_kernel
from ktune.tuner.measure.emulate.check import CheckResult, check_config, prepare_arguments
from ktune.tuner.measure.emulate.launch import LaunchError, run
from ktune.tuner.measure.emulate.translate import TranslationError, translate

__all__ = [
    "CheckResult",
    "CompileError",
    "EmulatedKernel",
    "LaunchError",
    "TranslationError",
    "check_config",
    "compile_kernel",
    "prepare_arguments",
    "run",
    "translate",
]
