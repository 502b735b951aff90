"""Restrictions given as Python callables (``ktune.tune``'s ``restrictions``), applied to a space.

The constraint language (``constraints.py``) is what a job stores and any front end may send;
a Python caller may also pass functions of a config (a dict) that return whether it is valid,
as Kernel Tuner allows. They are evaluated once per member of the space, never stored: a space
narrowed by them lists its members (``SearchSpace.restrict``'s form). A predicate that raises
rejects that config, and the first such error is reported once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ktune.search_space.parameters import Value
from ktune.search_space.space import SearchSpace

__all__ = ["MAX_PREDICATE_CONFIGS", "Predicate", "keep_where"]

#: a config (parameter name -> value) -> whether it is valid
Predicate = Callable[[Mapping[str, Value]], Any]
#: the most configs callables are evaluated on (beyond that, state restrictions as expressions)
MAX_PREDICATE_CONFIGS = 2_000_000
_CHUNK = 65_536


def keep_where(
    space: SearchSpace, predicates: Sequence[Predicate]
) -> tuple[SearchSpace, str | None]:
    """``space``'s members that every predicate accepts, and the first error a predicate
    raised (None when none did). A :class:`ValueError` when the space is too large to list."""
    if len(space) > MAX_PREDICATE_CONFIGS:
        raise ValueError(
            f"the space has {len(space)} configs before the callable restrictions, more than "
            f"{MAX_PREDICATE_CONFIGS} to evaluate them on: state some as expressions"
        )
    first_error: str | None = None
    keep = np.zeros(len(space), dtype=bool)
    for start in range(0, len(space), _CHUNK):
        indices = np.arange(start, min(start + _CHUNK, len(space)))
        for index, config in zip(indices, space.configs(indices)):
            try:
                keep[index] = all(bool(p(dict(config))) for p in predicates)
            except Exception as exc:  # noqa: BLE001 - the user's function rejects the config
                if first_error is None:
                    first_error = f"{config}: {type(exc).__name__}: {exc}"
    members = space.configs(np.flatnonzero(keep))
    return SearchSpace.from_configs(space.parameters, members, name=space.name), first_error
