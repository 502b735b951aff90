"""Device similarity for the lookup's ``similar_device`` tier, from the cost model's catalog.

Two devices are as far apart as their spec embeddings (``cost_model.embedding.embed``) of
their catalog specs (``cost_model.devices.lookup``). Without the cost model, or for a device
the catalog does not know, no distance can be told and the tier is skipped: the lookup never
guesses that two GPUs are alike.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import numpy as np

from ktune.db import DeviceDistance

__all__ = ["catalog_knows", "device_distance"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _catalog() -> tuple[Any, Any] | None:
    """(spec by device name, embedding of a spec), or None while the cost model lacks them."""
    try:
        from ktune.cost_model import devices, embedding

        # ``lookup(name)`` as planned; ``resolve(name)`` is what the catalog names it today.
        by_name = getattr(devices, "lookup", None) or devices.resolve
        return by_name, embedding.embed
    except (ImportError, AttributeError) as exc:
        log.info("no device catalog (%s): the similar-device tier is off", exc)
        return None


@lru_cache(maxsize=1024)
def _embedding(name: str) -> np.ndarray | None:
    catalog = _catalog()
    if catalog is None:
        return None
    lookup_spec, embed = catalog
    spec = lookup_spec(name)
    return None if spec is None else np.asarray(embed(spec), dtype=float)


def _distance(a: str, b: str) -> float | None:
    ea, eb = _embedding(a), _embedding(b)
    if ea is None or eb is None or ea.shape != eb.shape:
        return None
    return float(np.linalg.norm(ea - eb))


def device_distance() -> DeviceDistance | None:
    """The distance between two devices by name, or None when there is no catalog."""
    return _distance if _catalog() is not None else None


def catalog_knows(name: str) -> bool:
    return _embedding(name) is not None
