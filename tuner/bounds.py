"""The ranges of the numbers a job or a runner takes, shared by the CLI (``ktune.cli``), the
REST schemas (``ktune.server.schemas``, ``ktune.server.routers``) and the service settings
(``ktune.server.settings``), so that every entry point accepts the same values."""

from __future__ import annotations

__all__ = [
    "MAX_BATCH",
    "MAX_CONCURRENCY",
    "MAX_CONFIRM",
    "MAX_JOB_ID",
    "MAX_KERNEL_SOURCE_BYTES",
    "MAX_KERNEL_SPEC_BYTES",
    "MAX_LEASE_S",
    "MAX_POLL_S",
    "MAX_RAY_WORKERS",
    "MAX_REPLAY_SPEED",
    "MAX_REUSE_WINDOW_S",
    "MAX_SEED",
    "MAX_TRIALS",
    "MIN_REPLAY_SPEED",
]

MAX_JOB_ID = 2**31 - 1  # ids are PostgreSQL INTEGERs
MAX_SEED = 2**31 - 1  # a job's seed column is a PostgreSQL INTEGER too
MAX_TRIALS = 1_000_000  # a job's measurement budget and its patience
MAX_BATCH = 256  # configurations measured per batch
MAX_CONCURRENCY = 64  # jobs one runner process runs at once
MAX_LEASE_S = 3600  # seconds a runner holds a job without renewing its lease
MAX_POLL_S = 60  # seconds between a runner's looks at an empty queue
MAX_RAY_WORKERS = 1024  # GPUs of a Ray cluster one job measures on at once
# A job re-measures at most this many top candidates before it ends (each in 3 rounds).
MAX_CONFIRM = 20
# How old a logged trial may be for a job to reuse it: ten years, in seconds.
MAX_REUSE_WINDOW_S = 10 * 365 * 86400
# A replay spends the recorded GPU time at most this much slower than the GPU did (no slower):
# a replay_speed of 0.001 held a runner's slot for half an hour per measurement, deaf to cancel.
MIN_REPLAY_SPEED = 1.0
MAX_REPLAY_SPEED = 1e6
# A user's kernel travels with its job (the job's options, a REST body): its source and its
# T1 spec are bounded, in UTF-8 bytes.
MAX_KERNEL_SOURCE_BYTES = 256 * 1024
MAX_KERNEL_SPEC_BYTES = 64 * 1024
