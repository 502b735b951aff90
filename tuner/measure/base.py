"""The measurement interface: a backend measures configurations and reports errors as values.

A backend never raises for a bad configuration: compile errors, runtime errors, wrong results,
timeouts and configurations outside the space come back as a :class:`Measurement` whose
``status`` says what happened. Exceptions are kept for the backend itself being unusable.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from ktune.search_space.parameters import Config

__all__ = ["Backend", "BackendError", "Measurement", "Status", "WrappingBackend", "error_text"]


class BackendError(RuntimeError):
    """The backend cannot measure at all (missing file, no device); ends the job."""


class Status(str, enum.Enum):
    """Outcome of one measurement. Only ``ok`` carries a time."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    INVALID = "invalid"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Measurement:
    """One measured configuration.

    ``time_ms`` is the objective (median of repeats) and is ``None`` unless ``status`` is ok.
    ``cost_s`` is how long the measurement took on the device (compile + benchmark); the tuning
    clock advances by it, so replayed recordings spend time budgets as the GPU did.
    """

    config: Config
    status: Status
    time_ms: float | None = None
    times_ms: tuple[float, ...] = ()
    compile_ms: float = 0.0
    bench_ms: float = 0.0
    cost_s: float = 0.0
    error: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.time_ms is not None


class Backend(ABC):
    """Measures configurations of one workload on one device."""

    #: registry name, e.g. ``"replay"``
    name: str = ""

    @property
    @abstractmethod
    def device_name(self) -> str:
        """Device name as the vendor reports it (``NVIDIA RTX A4000``)."""

    @property
    def simulated(self) -> bool:
        """True when ``cost_s`` is recorded rather than wall time (the clock is simulated)."""
        return False

    @abstractmethod
    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        """Measure ``configs`` in order; one result per config, errors as values."""

    def close(self) -> None:
        """Release workers or devices. Idempotent."""


class WrappingBackend(Backend):
    """A backend that adds to ``inner``: its name, device and clock are ``inner``'s, closing it
    closes ``inner``, and ``measure`` passes through until a subclass overrides it."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name

    @property
    def device_name(self) -> str:
        return self.inner.device_name

    @property
    def simulated(self) -> bool:
        return self.inner.simulated

    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        return self.inner.measure(configs)

    def close(self) -> None:
        self.inner.close()


def error_text(text: str, lines: int = 6) -> str:
    """The first ``lines`` non-blank lines of a compiler's or runtime's message, at most 2,000
    characters: what a trial keeps of an error."""
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(kept[:lines])[:2000]
