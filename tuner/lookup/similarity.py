"""Device similarity for the lookup's similar-device tiers, from the cost model's catalog.

Two devices are as far apart as the spec embeddings (``ktune.cost_model.embedding.embed``) of their
catalog specs (``ktune.cost_model.devices.resolve``). Without the cost model, or for a device the
catalog does not know, no distance can be told and the device is left out: the lookup never
guesses that two GPUs are alike. The catalog and numpy are loaded when a distance is first
asked for, so the exact and nearest-shape tiers never load them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["catalog_knows", "device_distance", "normalise_name"]


@lru_cache(maxsize=1)
def _catalog() -> tuple[Callable[[str], Any], Callable[[Any], Any]] | None:
    """(spec by device name, embedding of a spec), or None while the cost model lacks them."""
    try:
        from ktune.cost_model import devices, embedding

        return devices.resolve, embedding.embed
    except (ImportError, AttributeError) as exc:
        import logging

        logging.getLogger(__name__).info(
            "no device catalog (%s): the similar-device tiers are off", exc
        )
        return None


@lru_cache(maxsize=1024)
def _embedding(name: str) -> tuple[float, ...] | None:
    catalog = _catalog()
    if catalog is None:
        return None
    spec_of, embed = catalog
    spec = spec_of(name)
    return None if spec is None else tuple(float(v) for v in embed(spec))


def device_distance(a: str, b: str) -> float | None:
    """The Euclidean distance between the embeddings of devices ``a`` and ``b``, or None when
    either is unknown (or there is no catalog)."""
    ea, eb = _embedding(a), _embedding(b)
    if ea is None or eb is None or len(ea) != len(eb):
        return None
    import numpy as np

    return float(np.linalg.norm(np.asarray(ea) - np.asarray(eb)))


def catalog_knows(name: str) -> bool:
    """Whether the catalog has a spec of device ``name``."""
    return _embedding(name) is not None


def normalise_name(name: str) -> str:
    """A device name as the catalog compares names (case, separators, a vendor word)."""
    from ktune.cost_model.devices import normalise_name as normalise

    return normalise(name)
