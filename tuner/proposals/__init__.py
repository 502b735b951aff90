"""Proposal sources for model-guided search: each turns a scorer into candidate configs.

A *scorer* maps dense indices of a space to predicted scores (higher = predicted faster);
the sources never measure anything. ``annealing`` is AutoTVM's simulated annealing on the cost
model, ``rl_agent`` Chameleon's PPO agent over knob moves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Scorer = Callable[[np.ndarray], np.ndarray]

__all__ = ["Scorer"]
