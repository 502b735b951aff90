"""ktune's public Python API for build systems: read tuned configs from the tuning log.

    >>> import ktune
    >>> answer = ktune.lookup("convolution_kernel", (4096, 4096), device="NVIDIA RTX A4000")
    >>> answer.tier, answer.config["block_size_x"]          # doctest: +SKIP
    ('exact', 32)

:func:`lookup` gives the same answer as ``GET /v1/best`` and ``ktune best --format json``
(``Answer.to_dict()`` is that JSON). It never tunes. Errors in the question raise
:class:`LookupInputError` (a ValueError naming the field); an unreachable log raises
``db.DatabaseError``.
"""

from __future__ import annotations

from ktune._cost_model_choice import cost_model_choice
from ktune._lookup import Answer, LookupInputError, lookup
from ktune._model_tier import ModelChoice, register_model_choice

# The last tier ranks an operator's space with a cost model trained on the log; a build system
# may install its own choice (or None, to turn the tier off) with register_model_choice.
register_model_choice(cost_model_choice)

__all__ = ["Answer", "LookupInputError", "ModelChoice", "lookup", "register_model_choice"]
