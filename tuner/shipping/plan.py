"""What a build ships, read from the log: per entry point, the winners of its tuned shapes.

:func:`plan_build` asks the log for the best config of every tuned workload of the operators on
one device, groups them into entry points (operator, dtype, base layout), turns each workload
into the entry's sizes, and makes the distinct configs the entry's variants; the operator's
default config (valid at every shape) is always a variant, so the dispatch has a last resort.
Each winner keeps the job and trial that measured it and the toolchain it ran under.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ktune.db import TuningLog
from ktune.search_space.operators.cpu import CpuOperator
from ktune.search_space.operators.entry import EntryAbi
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload

__all__ = [
    "BuildError",
    "EntryPlan",
    "Variant",
    "Winner",
    "entry_name",
    "operator_of",
    "plan_build",
]


class BuildError(ValueError):
    """A build that cannot be made (one line: unknown operator or device, nothing tuned, a
    toolchain that cannot build it)."""


@dataclass(frozen=True)
class Winner:
    """The best trial of one tuned shape."""

    workload: Workload
    sizes: tuple[int, ...]
    config: Config
    time_ms: float
    trial_id: int
    job_id: int | None
    seq: int | None
    toolchain: dict[str, Any]
    confirmed_ms: float | None = None
    noise_band: float | None = None
    flag: str = ""
    stale: str | None = None


@dataclass
class Variant:
    """A distinct config of an entry point, with the tuned shapes it serves (none for the
    default, when no shape won with it)."""

    config: Config
    symbol: str
    default: bool = False
    serves: list[Winner] = field(default_factory=list)

    @property
    def toolchain(self) -> dict[str, Any]:
        """The toolchain of its fastest winner (empty for a default that won nothing)."""
        best = min(self.serves, key=lambda w: w.time_ms, default=None)
        return best.toolchain if best else {}


@dataclass
class EntryPlan:
    """One entry point: its operator (a CPU or GPU operator object), dtype, base layout and
    variants (the default's index is ``default``)."""

    name: str
    operator: Any
    dtype: str
    layout: str
    variants: list[Variant]
    default: int

    @property
    def abi(self) -> EntryAbi:
        abi: EntryAbi = self.operator.entry_for(self.layout)
        return abi

    @property
    def gpu(self) -> bool:
        return not isinstance(self.operator, CpuOperator)

    @property
    def requirements(self) -> tuple[str, ...]:
        return tuple(getattr(self.operator, "requirements", ()))

    def tuned(self) -> list[tuple[tuple[int, ...], int]]:
        """Every tuned shape's sizes with the index of the variant that won it, in size order."""
        pairs = [(w.sizes, i) for i, v in enumerate(self.variants) for w in v.serves]
        return sorted(pairs)

    def workload(self, variant: Variant) -> Workload:
        """A workload to render ``variant`` for (its first tuned shape's, else any)."""
        if variant.serves:
            return variant.serves[0].workload
        return next(w.workload for v in self.variants for w in v.serves)


def entry_name(operator: str, dtype: str, layout: str, layouts: Sequence[str]) -> str:
    """``ktune_<operator>_<dtype>``, with the layout when the operator has several
    (``ktune_conv2d_nhwc_float16``)."""
    middle = f"_{layout.lower()}" if len([x for x in layouts if x]) > 1 and layout else ""
    return f"ktune_{operator}{middle}_{dtype}"


def operator_of(name: str) -> Any:
    """ktune's CPU or GPU operator ``name``; a :class:`BuildError` naming the choices."""
    from ktune.search_space.operators import REGISTRY, cpu, get
    from ktune.search_space.operators.base import OperatorError

    if name in cpu.REGISTRY:
        return cpu.get(name)
    if name in REGISTRY:
        return get(name)
    raise BuildError(
        f"unknown operator {name!r} (ktune builds: {', '.join([*cpu.REGISTRY, *REGISTRY])})"
    ) from OperatorError(name)


def plan_build(
    tlog: TuningLog,
    operators: Sequence[str],
    device: str,
    dtypes: Sequence[str] = (),
    *,
    allow_stale: bool = False,
) -> list[EntryPlan]:
    """The entry points of a build of ``operators`` (``dtypes``: all tuned ones when empty) on
    ``device``; a :class:`BuildError` naming what is missing. A best measured with an older
    kernel template or toolchain (stale) is left out unless ``allow_stale``."""
    from ktune.tuner.lookup.trust import stale_reason

    if not operators:
        raise BuildError("name at least one --operator")
    ops = {name: operator_of(name) for name in dict.fromkeys(operators)}
    if tlog.get_device(device) is None:
        known = sorted(d.name for d in tlog.list_devices())
        raise BuildError(
            f"the log knows no device {device!r}"
            + (f" (devices: {'; '.join(known)})" if known else " (it has no trials)")
        )
    plans: list[EntryPlan] = []
    for name, op in ops.items():
        for dtype in dtypes:
            if dtype not in op.dtypes:
                raise BuildError(
                    f"{name} has no dtype {dtype!r} (choose from: {', '.join(op.dtypes)})"
                )
        records = tlog.tuned_configs(operator=name, device=device)
        groups: dict[tuple[str, str], list[Winner]] = {}
        stale: list[str] = []
        for rec in records:
            if dtypes and rec.dtype not in dtypes:
                continue
            workload = Workload.from_key(rec.workload_key)
            if set(rec.config) != set(op.default_config(workload)):
                continue  # tuned under another interface of the kernel (other knobs)
            reason = stale_reason(rec)
            if reason and not allow_stale:
                stale.append(reason)
                continue
            winner = Winner(
                workload,
                tuple(op.entry_sizes(workload)),
                dict(rec.config),
                rec.time_ms,
                rec.trial_id,
                rec.job_id,
                rec.seq,
                dict(rec.toolchain),
                rec.confirmed_ms,
                rec.noise_band,
                rec.flag,
                reason,
            )
            base = workload.layout.partition("_pad")[0]
            groups.setdefault((workload.dtype, base), []).append(winner)
        if not groups:
            which = f" {'/'.join(dtypes)}" if dtypes else ""
            if stale:
                raise BuildError(
                    f"every tuned{which} {name} on {device!r} is stale ({stale[0]}): tune again, "
                    "or ship them with --allow-stale"
                )
            raise BuildError(f"the log has no tuned{which} {name} on {device!r}")
        for (dtype, layout), winners in sorted(groups.items()):
            plans.append(_entry_plan(op, name, dtype, layout, winners))
    return plans


def _entry_plan(op: Any, name: str, dtype: str, layout: str, winners: list[Winner]) -> EntryPlan:
    entry = entry_name(name, dtype, layout, op.layouts)
    variants: dict[str, Variant] = {}
    for w in sorted(winners, key=lambda w: w.sizes):
        key = json.dumps(w.config, sort_keys=True)
        if key not in variants:
            variants[key] = Variant(w.config, f"{entry}_v{len(variants)}")
        variants[key].serves.append(w)
    default_config = op.default_config(winners[0].workload)
    key = json.dumps(default_config, sort_keys=True)
    if key not in variants:
        variants[key] = Variant(default_config, f"{entry}_v{len(variants)}")
    variants[key].default = True
    ordered = list(variants.values())
    return EntryPlan(entry, op, dtype, layout, ordered, ordered.index(variants[key]))
