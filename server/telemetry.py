"""Prometheus metrics of the service, in a registry of its own per app.

Counts that live in the tuning log (jobs by state, trials measured, measurement errors) are
read from it at scrape time, so every API process and worker reports the same totals.
Lookup latency is measured in this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ktune.db import JOB_STATES, TRIAL_STATUSES, DatabaseError, TuningLog
from ktune.tuner.runner import RunnerStatus

__all__ = ["CONTENT_TYPE", "Telemetry"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _LogCollector(Collector):
    def __init__(self, tlog: TuningLog, runner: Callable[[], RunnerStatus | None]) -> None:
        self._tlog = tlog
        self._runner = runner

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("ktune_database_up", "1 when the tuning log answers.")
        try:
            jobs = self._tlog.job_counts()
            trials = self._tlog.trial_counts()
        except DatabaseError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        by_state = GaugeMetricFamily(
            "ktune_jobs", "Jobs in the tuning log by state.", labels=["state"]
        )
        for state in JOB_STATES:
            by_state.add_metric([state], jobs.get(state, 0))
        yield by_state
        measured = CounterMetricFamily(
            "ktune_trials_measured", "Configurations measured by jobs (imports excluded)."
        )
        measured.add_metric([], sum(trials.values()))
        yield measured
        errors = CounterMetricFamily(
            "ktune_measurement_errors",
            "Measurements that did not succeed, by status.",
            labels=["status"],
        )
        for status in TRIAL_STATUSES:
            if status != "ok":
                errors.add_metric([status], trials.get(status, 0))
        yield errors
        runner = self._runner()
        if runner is not None:
            running = GaugeMetricFamily(
                "ktune_runner_jobs", "Jobs this server's runner is running."
            )
            running.add_metric([], len(runner.running))
            yield running


class Telemetry:
    """The metrics of one app."""

    def __init__(self, tlog: TuningLog, runner: Callable[[], RunnerStatus | None]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_LogCollector(tlog, runner))
        self.lookup_latency = Histogram(
            "ktune_lookup_latency_seconds",
            "Time to answer GET /v1/best, in this process.",
            labelnames=["tier"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
