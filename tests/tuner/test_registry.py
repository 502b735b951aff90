from __future__ import annotations

import pytest

from ktune.tuner import strategies


def test_registry_lists_random_and_optuna() -> None:
    assert {"random", "optuna"} <= set(strategies.names())


def test_each_registered_name_resolves_to_its_class() -> None:
    for name in strategies.names():
        assert strategies.get(name).name == name


def test_unknown_strategy_names_the_choices() -> None:
    with pytest.raises(
        strategies.StrategyError, match=r"unknown strategy 'nope' \(choose from: .*random"
    ):
        strategies.get("nope")


def test_the_default_strategy_is_registered_and_is_auto() -> None:
    assert strategies.DEFAULT == "auto" and strategies.DEFAULT in strategies.names()
