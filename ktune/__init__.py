"""ktune's public Python API: tune a kernel of your own, and read tuned configs from the log.

    >>> result = ktune.tune("stencil", "stencil.c", (512, 512), [out, grid], {"tile_x": [8, 16]})
    ...                                                         # doctest: +SKIP
    >>> result.best.config                                      # doctest: +SKIP

:func:`tune` (``ktune._tune``) tunes a C or CUDA kernel as Kernel Tuner's ``tune_kernel`` does,
recording every trial as a job of the tuning log; bad input raises :class:`TuneInputError`.

    >>> import ktune
    >>> answer = ktune.lookup("convolution_kernel", (4096, 4096), device="NVIDIA RTX A4000")
    >>> answer.tier, answer.config["block_size_x"]          # doctest: +SKIP
    ('exact', 32)

:func:`lookup` gives the same answer as ``GET /v1/best`` and ``ktune best --format json``
(``Answer.to_dict()`` is that JSON). It never tunes. Errors in the question raise
:class:`LookupInputError` (a ValueError naming the field); an unreachable log raises
``db.DatabaseError``. The names are those of ``ktune.tuner.lookup``, imported on first use
(``import ktune`` alone loads nothing else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktune._tune import Trial, TuneInputError, TuneResult, tune
    from ktune.tuner.lookup import (
        Answer,
        LookupInputError,
        ModelChoice,
        lookup,
        register_model_choice,
    )

__all__ = [
    "Answer",
    "LookupInputError",
    "ModelChoice",
    "Trial",
    "TuneInputError",
    "TuneResult",
    "lookup",
    "register_model_choice",
    "tune",
]

_TUNE_NAMES = frozenset({"Trial", "TuneInputError", "TuneResult", "tune"})


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _TUNE_NAMES:
        from ktune import _tune as family
    else:
        from ktune.tuner import lookup as family  # type: ignore[no-redef]

    value = getattr(family, name)
    globals()[name] = value
    return value
