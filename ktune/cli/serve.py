"""``ktune serve``: the REST API, the dashboard and a job runner in one process."""

from __future__ import annotations

import socket
from enum import Enum
from typing import Annotated

import typer

from ktune.cli.common import CliError, DbOption, check_range, err, out
from ktune.cli.logs import log_to_stderr
from ktune.tuner.bounds import MAX_CONCURRENCY

__all__ = ["serve"]


class LogLevel(str, Enum):
    """uvicorn's log levels."""

    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"
    trace = "trace"


def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", help="Port to listen on (0: any free port).")
    ] = 8000,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            help=(
                f"Jobs run at once in this process, 0..{MAX_CONCURRENCY} "
                "(0: leave them to `ktune worker`); default $KTUNE_RUNNER_CONCURRENCY or 1."
            ),
        ),
    ] = None,
    log_level: Annotated[
        LogLevel,
        typer.Option(
            "--log-level",
            help="Log level of the server: requests, job starts and ends (stderr).",
        ),
    ] = LogLevel.info,
    db: DbOption = None,
) -> None:
    """Serve the REST API (/v1) and the dashboard (/), and run queued jobs; prints the address."""
    import uvicorn

    from ktune.server import Settings, create_app

    check_range("--port", port, 0, 65535)
    check_range("--concurrency", concurrency, 0, MAX_CONCURRENCY)
    settings = Settings.load(database_url=db, runner_concurrency=concurrency)
    app = create_app(settings)
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    tlog = app.state.tlog
    out.print(
        f"ktune serving on {url}  (dashboard {url}, API {url}v1, docs {url}docs)", markup=False
    )
    out.print(
        f"tuning log {tlog.url}; runner: {settings.runner_concurrency or 'off'}", markup=False
    )
    if not settings.api_tokens and not tlog.list_tokens():
        err.print(
            (
                "note: no API tokens yet, so writes are refused; "
                "create one with `ktune token create NAME`"
            ),
            markup=False,
        )
    out.file.flush()
    log_to_stderr(log_level.value)  # ktune's own lines: one per request, job starts and ends
    config = uvicorn.Config(app, log_level=log_level.value, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 1) from None
    sock.set_inheritable(True)
    return sock
