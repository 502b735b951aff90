"""Search spaces: typed parameters, constraints over them, and enumeration of the valid configs.

Public names are re-exported here; the modules behind them are implementation detail.
Errors are all ``ValueError`` subclasses: ``ParameterError`` (a parameter definition),
``ConstraintError`` (a constraint expression), ``SpaceError`` (a space or a config that does
not fit it), ``WorkloadError`` (a workload key).
"""

from __future__ import annotations

from ktune.search_space.constraints import Constraint, ConstraintError, parse_constraint
from ktune.search_space.parameters import Config, Kind, Parameter, ParameterError, Value
from ktune.search_space.space import SearchSpace, SpaceError
from ktune.search_space.workload import Workload, WorkloadError

__all__ = [
    "Config",
    "Constraint",
    "ConstraintError",
    "Kind",
    "Parameter",
    "ParameterError",
    "SearchSpace",
    "SpaceError",
    "Value",
    "Workload",
    "WorkloadError",
    "parse_constraint",
]
