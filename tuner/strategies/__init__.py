"""Search strategies and their registry.

``REGISTRY`` maps a strategy name to ``"module:Class"``; modules are imported only when the
strategy is used, so a heavy optional dependency costs nothing until then.
"""

from __future__ import annotations

import importlib

from ktune.search_space.excerpt import excerpt
from ktune.search_space.space import SearchSpace
from ktune.tuner.strategies.base import Observation, SearchContext, Strategy, StrategyError

__all__ = [
    "DEFAULT",
    "REGISTRY",
    "Observation",
    "SearchContext",
    "Strategy",
    "StrategyError",
    "create",
    "get",
    "names",
]

#: the strategy a job gets when it names none: the winner of benchmarks/search_efficiency.py
DEFAULT = "auto"

REGISTRY: dict[str, str] = {
    "random": "ktune.tuner.strategies.random_search:RandomSearch",
    "optuna": "ktune.tuner.strategies.optuna_tpe:OptunaTPE",
    "annealing": "ktune.tuner.strategies.annealing:ModelAnnealing",
    "rl": "ktune.tuner.strategies.rl:ReinforcementSearch",
    "auto": "ktune.tuner.strategies.auto:AutoSearch",
    "bayes": "ktune.tuner.strategies.bayes:BayesianSearch",
}


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> type[Strategy]:
    """The strategy class registered as ``name``; ``StrategyError`` when unknown or unavailable."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise StrategyError(
            f"unknown strategy {excerpt(name)} (choose from: {', '.join(names())})"
        ) from None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise StrategyError(
            f"strategy {excerpt(name)} needs a missing package: {exc.name or exc}"
        ) from None
    cls: type[Strategy] = getattr(module, class_name)
    return cls


def create(
    name: str, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
) -> Strategy:
    """Instantiate strategy ``name`` on ``space`` (``context``: see :class:`SearchContext`)."""
    return get(name)(space, seed=seed, context=context)
