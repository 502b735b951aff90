"""Search spaces: typed parameters, constraints over them, and enumeration of the valid configs.

Public names are re-exported here; the modules behind them are implementation detail.
Errors are all ``ValueError`` subclasses: ``ParameterError`` (a parameter definition),
``ConstraintError`` (a constraint expression), ``SpaceError`` (a space or a config that does
not fit it), ``WorkloadError`` (a workload key).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: the module of each public name: imported on first use, so that reading a workload key
#: (``ktune.search_space.workload``, what a build-time lookup needs) loads no numpy
_MODULES = {
    "Constraint": "constraints",
    "ConstraintError": "constraints",
    "parse_constraint": "constraints",
    "Config": "parameters",
    "Kind": "parameters",
    "Parameter": "parameters",
    "ParameterError": "parameters",
    "Value": "parameters",
    "SearchSpace": "space",
    "SpaceError": "space",
    "Workload": "workload",
    "WorkloadError": "workload",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"ktune.search_space.{module}"), name)
    globals()[name] = value
    return value
