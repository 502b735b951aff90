"""The parameters a Kernel Tuner export of one workload on one device is written with.

A workload key (operator, shape, dtype) does not fix the parameter set: a kernel's space gains
knobs and values over time (the Benchmark Hub holds convolution recordings with 6, 8 and 10
knobs under the same kernel name and problem size), and the tuning log keeps every version's
trials under the one workload, whose stored space is the first one seen. A cache file has one
parameter set, so :func:`export_parameters` picks it from the trials themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ktune.search_space.parameters import Parameter, Value

__all__ = ["ExportPlan", "export_parameters"]


@dataclass(frozen=True)
class ExportPlan:
    """The parameters to write, which of the configs they cover, and how many are left out."""

    parameters: tuple[Parameter, ...]
    #: positions (in the configs given) of the configs written with ``parameters``
    included: tuple[int, ...]
    #: configs left out because they use another set of parameter names
    left_out: int


def export_parameters(
    stored: Sequence[Parameter], configs: Sequence[Mapping[str, Value]]
) -> ExportPlan:
    """The parameter set for a cache file of ``configs`` (oldest first).

    The names are those of the newest config. With the stored parameters' names, the stored
    value lists are kept, in their order, and values only the configs have are appended (a
    space that grew). With other names, each parameter lists the values the configs took,
    sorted. Configs with yet other names cannot share the file: they are left out and counted.
    """
    if not configs:
        return ExportPlan(tuple(stored), (), 0)
    names = tuple(configs[-1])
    included = tuple(i for i, c in enumerate(configs) if tuple(c) == names)
    seen: dict[str, list[Value]] = {n: [] for n in names}
    for i in included:
        for n in names:
            if configs[i][n] not in seen[n]:
                seen[n].append(configs[i][n])
    by_name = {p.name: p for p in stored}
    if set(names) == set(by_name):
        params = [_extended(p, seen[p.name]) for p in stored]
    else:
        params = [Parameter.of(n, _sorted(seen[n])) for n in names]
    return ExportPlan(tuple(params), included, len(configs) - len(included))


def _extended(p: Parameter, values: Sequence[Value]) -> Parameter:
    extra = [v for v in values if v not in p.values]
    if not extra:
        return p
    return Parameter.of(p.name, list(p.values) + _sorted(extra), p.default)


def _sorted(values: Sequence[Value]) -> list[Value]:
    try:
        return sorted(values)
    except TypeError:  # values of mixed kinds: Parameter reports that
        return list(values)
