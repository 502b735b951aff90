"""Commands that list what ktune can tune with: ``strategies``, ``operators`` and ``spaces``."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ktune.cli.common import DbOption, open_log, out
from ktune.search_space.formats import load_cache
from ktune.search_space.operators.listing import all_operators
from ktune.tuner import strategies as registry
from ktune.tuner.sources import bundled_recordings

__all__ = ["operators", "spaces", "strategies"]


def strategies() -> None:
    """Registered search strategies."""
    table = Table("strategy", "what it does")
    for name in registry.names():
        try:
            summary = registry.get(name).summary
        except registry.StrategyError as exc:
            summary = f"unavailable: {exc}"
        table.add_row(f"{name} (default)" if name == registry.DEFAULT else name, summary)
    out.print(table)


def operators() -> None:
    """Operators ktune tunes for real, on a GPU (--op NAME, or on a Ray cluster) or this CPU."""
    table = Table("operator", "runs on", "shape (--shape)", "dtypes", "layouts", "what it computes")
    for info in all_operators():
        cells = (
            info.name,
            info.device,
            info.shape,
            ", ".join(info.dtypes),
            ", ".join(x for x in info.layouts if x) or "-",
            info.summary,
        )
        table.add_row(*(escape(c) for c in cells))  # shapes hold [optional] parts, not markup
    out.print(table)


def spaces(db: DbOption = None) -> None:
    """Bundled recorded spaces, and the workloads in the tuning log."""
    table = Table(
        "recording (use with --replay)",
        "kernel",
        "device",
        "configs",
        title="bundled recorded spaces",
    )
    for name, path in bundled_recordings().items():
        rec = load_cache(path)
        table.add_row(name, rec.kernel_name, rec.device_name, str(len(rec.space)))
    out.print(table)
    with open_log(db) as tlog:
        rows = tlog.list_workloads()
    if not rows:
        out.print("no workloads in the tuning log yet")
        return
    logged = Table("workload", "parameters", title=f"workloads in {tlog.url}")
    for w in rows:
        params = (w.space or {}).get("parameters", [])
        logged.add_row(w.key, ", ".join(f"{p['name']}({len(p['values'])})" for p in params))
    out.print(logged)
