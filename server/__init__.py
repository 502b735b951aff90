"""The ktune service: REST API (``/v1``), the convergence dashboard, and the runner started
with the app (``ktune.tuner.runner.Runner``, which ``ktune worker`` runs on its own).

``create_app`` builds the FastAPI app; ``Settings`` reads ``KTUNE_*``. Only the CLI imports
this package. Names load on first use, so ``ktune worker``, which needs only the settings,
loads no FastAPI.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktune.server.app import create_app
    from ktune.server.settings import Settings, SettingsError

__all__ = ["Settings", "SettingsError", "create_app"]

_WHERE = {
    "create_app": "ktune.server.app",
    "Settings": "ktune.server.settings",
    "SettingsError": "ktune.server.settings",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
