"""A test double for :class:`Backend`: measures configurations with a Python function."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ktune.search_space.parameters import Config
from ktune.tuner.measure.base import Backend, Measurement, Status

__all__ = ["FunctionBackend"]


class FunctionBackend(Backend):
    """``fn(config)`` returns a time in ms, or a :class:`Status` for a failure.

    Each measurement costs ``cost_s`` on a simulated clock; ``calls`` lists every measured
    config, so tests can assert what was (not) measured.
    """

    name = "fake"

    def __init__(
        self,
        fn: Callable[[Config], float | Status],
        *,
        device: str = "Fake GPU",
        cost_s: float = 1.0,
    ) -> None:
        self._fn = fn
        self._device = device
        self._cost_s = cost_s
        self.calls: list[Config] = []

    @property
    def device_name(self) -> str:
        return self._device

    @property
    def simulated(self) -> bool:
        return True

    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        out = []
        for config in configs:
            self.calls.append(dict(config))
            result = self._fn(config)
            if isinstance(result, Status):
                out.append(
                    Measurement(dict(config), result, cost_s=self._cost_s, error=str(result))
                )
            else:
                t = float(result)
                out.append(Measurement(dict(config), Status.OK, t, (t,), cost_s=self._cost_s))
        return out
