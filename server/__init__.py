"""The ktune service: REST API (``/v1``), job runner and convergence dashboard.

``create_app`` builds the FastAPI app; ``Runner`` is the job loop that the server runs in
the background and ``ktune worker`` runs on its own; ``Settings`` reads ``KTUNE_*``.
Nothing else in ktune imports this package.
"""

from __future__ import annotations

from ktune.server.app import create_app
from ktune.server.settings import Settings, SettingsError
from ktune.tuner.runner import Runner

__all__ = ["Runner", "Settings", "SettingsError", "create_app"]
