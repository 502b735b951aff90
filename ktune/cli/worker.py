"""``ktune worker``: run queued jobs of the tuning log in this process, beside any server."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from ktune.cli.common import CliError, DbOption, check_range, open_log, out
from ktune.cli.logs import log_to_stderr
from ktune.tuner.bounds import MAX_CONCURRENCY, MAX_LEASE_S, MAX_POLL_S
from ktune.tuner.sources import BACKENDS, backend_unavailable

__all__ = ["worker"]

_GRACE_S = 30.0


def worker(
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-j", help=f"Jobs run at once (1..{MAX_CONCURRENCY}).")
    ] = 1,
    lease: Annotated[
        float | None,
        typer.Option(
            "--lease",
            help=(
                f"Seconds a job stays ours without renewal, up to {MAX_LEASE_S:g} "
                "(default $KTUNE_LEASE_SECONDS or 30)."
            ),
        ),
    ] = None,
    poll: Annotated[
        float | None,
        typer.Option(
            "--poll", help=f"Seconds between looks at the queue when idle, up to {MAX_POLL_S:g}."
        ),
    ] = None,
    drain: Annotated[bool, typer.Option("--drain", help="Exit once the queue is empty.")] = False,
    backend: Annotated[
        list[str] | None,
        typer.Option(
            "--backend",
            help=(
                f"Run only jobs of this backend: {' or '.join(BACKENDS)} "
                "(repeatable; default $KTUNE_RUNNER_BACKENDS, "
                "else every one this installation can run)."
            ),
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Claim queued jobs and run them; several workers may share a PostgreSQL log.

    A job whose runner died is resumed from its trials once its lease expires. SIGTERM or
    Ctrl-C stops after the current batch and puts unfinished jobs back in the queue.
    """
    from ktune.server import Settings
    from ktune.tuner.runner import Runner

    if concurrency < 1:
        raise CliError(f"--concurrency must be >= 1, got {concurrency}")
    check_range("--concurrency", concurrency, 1, MAX_CONCURRENCY)  # as `ktune serve`
    check_range("--lease", lease, 0, MAX_LEASE_S, low_open=True)
    check_range("--poll", poll, 0, MAX_POLL_S, low_open=True)
    for name in backend or ():
        if name not in BACKENDS:
            raise CliError(
                f"--backend: unknown backend {name!r} (choose from: {', '.join(BACKENDS)})"
            )
        if (reason := backend_unavailable(name)) is not None:
            raise CliError(f"--backend {name}: {reason}")
    settings = Settings.load(
        database_url=db,
        lease_seconds=lease,
        poll_seconds=poll,
        runner_backends=tuple(backend) if backend else None,
    )
    tlog = open_log(settings.database_url)
    runner = Runner(
        tlog,
        concurrency=concurrency,
        lease_s=settings.lease_seconds,
        poll_s=settings.poll_seconds,
        drain=drain,
        backends=settings.runner_backends or None,
    )
    log_to_stderr("info")  # job starts and ends, lost leases
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    with tlog:
        out.print(
            f"worker {runner.name}: {concurrency} slot(s) on {tlog.url}"
            + (", until the queue is empty" if drain else ""),
            markup=False,
        )
        runner.start()
        try:
            while not stop.wait(0.2):
                if drain and runner.wait(0):
                    break
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            runner.stop(_GRACE_S)
    out.print(f"worker {runner.name} stopped", markup=False)
