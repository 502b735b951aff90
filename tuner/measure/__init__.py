"""Measurement backends. ``replay`` answers from recordings; more backends arrive with workers."""

from __future__ import annotations

from tuner.measure.base import Backend, BackendError, Measurement, Status

__all__ = ["Backend", "BackendError", "Measurement", "Status"]
