"""ktune's public Python API for build systems: read tuned configs from the tuning log.

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
    from ktune.tuner.lookup import (
        Answer,
        LookupInputError,
        ModelChoice,
        lookup,
        register_model_choice,
    )

__all__ = ["Answer", "LookupInputError", "ModelChoice", "lookup", "register_model_choice"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ktune.tuner import lookup as family

    value = getattr(family, name)
    globals()[name] = value
    return value
