"""The ``ktune`` command line. Every error is one line on stderr and a non-zero exit.

:data:`COMMANDS` names each command with its module and its one-line help. :func:`main` prints
``ktune --help`` from the table and runs ``ktune NAME ...`` by importing that command's module
alone, running the command as its own program (``ktune NAME``). So ``ktune --help`` loads
nothing of the commands (not even Typer), and ``ktune best`` (run once per kernel by a build;
argparse) loads neither Typer nor pydantic. A command's own ``--help`` is formatted as its
framework formats it. :data:`app` is the Typer group of them all, for tools that parse a
command line as ktune would (``ktune.cli.root``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

from ktune.cli.common import CliError
from ktune.db.errors import DatabaseError, DatabaseInputError

if TYPE_CHECKING:
    import typer

    app: typer.Typer

#: the exit code when the tuning log cannot be reached or read (a build script can tell it
#: from 1, "nothing tuned answers that")
EXIT_LOG_UNAVAILABLE = 4

__all__ = ["COMMANDS", "EXIT_LOG_UNAVAILABLE", "HELP", "Entry", "app", "load", "main", "usage"]

HELP = "ktune: autotuning of GPU kernel schedules, with a tuning log read at build time."


class Entry(NamedTuple):
    """A command of ``ktune``: where it is (``module:attribute``: a Typer command function, a
    Typer group, or an object with ``main(args, prog_name)``) and its one-line help (the first
    paragraph of its own; a test keeps the two alike)."""

    target: str
    help: str


COMMANDS: dict[str, Entry] = {
    "tune": Entry(
        "ktune.cli.tune:tune",
        "Tune a recorded space (--replay), an operator on this GPU or CPU (--op), or resume a job.",
    ),
    "check": Entry(
        "ktune.cli.check:check",
        "Run configs of a GPU operator for the right answer, without timing them.",
    ),
    "import": Entry(
        "ktune.cli.interchange:import_",
        "Import recorded measurements (a Kernel Tuner cache file, KTT output, or T4 results "
        "with their T1 spec and GPU) into the tuning log.",
    ),
    "export": Entry(
        "ktune.cli.interchange:export",
        "Export the log of one workload on one device as a Kernel Tuner cache file or T4 results.",
    ),
    "jobs": Entry("ktune.cli.log_commands:jobs", "List tuning jobs, newest first."),
    "trials": Entry("ktune.cli.log_commands:trials", "The trials of a job, in measurement order."),
    "best": Entry(
        "ktune.cli.best:best", "Best configurations in the log, or the lookup a build system makes."
    ),
    "build": Entry(
        "ktune.cli.build:build",
        "Compile the log's tuned kernels of one device into a library: a C header with one entry "
        "point per operator and dtype, static and shared libraries, a dispatch decided at build "
        "time (any shape at run time), manifest.json, CMake and pkg-config files.",
    ),
    "devices": Entry("ktune.cli.log_commands:devices", "Devices that have trials in the log."),
    "strategies": Entry("ktune.cli.catalog:strategies", "Registered search strategies."),
    "operators": Entry(
        "ktune.cli.catalog:operators",
        "Operators ktune tunes for real, on a GPU (--op NAME, or on a Ray cluster) or this CPU.",
    ),
    "spaces": Entry(
        "ktune.cli.catalog:spaces", "Bundled recorded spaces, and the workloads in the tuning log."
    ),
    "serve": Entry(
        "ktune.cli.serve:serve",
        "Serve the REST API (/v1) and the dashboard (/), and run queued jobs; prints the address.",
    ),
    "worker": Entry(
        "ktune.cli.worker:worker",
        "Claim queued jobs and run them; several workers may share a PostgreSQL log.",
    ),
    "token": Entry("ktune.cli.tokens:app", "API tokens of the REST service (stored hashed)."),
    "db": Entry("ktune.cli.database:app", "Manage the tuning-log database."),
}


def load(name: str) -> Any:
    """The command object of ``ktune NAME`` (a Typer command or group, or ``ktune best``'s own),
    built from its module, which is imported now. It runs with ``.main(args=..., prog_name=...,
    standalone_mode=False)``, which returns the exit code or raises."""
    module, _, attribute = COMMANDS[name].target.partition(":")
    target: Any = getattr(import_module(module), attribute)
    if callable(getattr(target, "main", None)):
        return target  # runs as it is (ktune best: argparse)
    import typer

    outer = typer.Typer(add_completion=False)  # as a part of ktune, not a program of its own
    if isinstance(target, typer.Typer):
        outer.add_typer(target, name=name)
        return typer.main.get_group(outer).commands[name]
    outer.command(name)(target)
    return typer.main.get_command(outer)


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ktune.cli.root import app as group

    globals()["app"] = group
    return group


def usage() -> str:
    """``ktune --help``: what ktune is, and every command with its one-line help."""
    import shutil
    import textwrap

    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    indent = max(len(name) for name in COMMANDS) + 4
    lines = [
        "Usage: ktune COMMAND [ARGS]...",
        "",
        *textwrap.wrap(HELP, width, initial_indent="  ", subsequent_indent="  "),
        "",
        "Commands:",
    ]
    for name, entry in COMMANDS.items():
        lines += textwrap.wrap(
            entry.help,
            width,
            initial_indent=f"  {name:<{indent - 2}}",
            subsequent_indent=" " * indent,
        )
    lines += ["", "Run `ktune COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("--help", "-h"):
        print(usage())
        return 0
    if args[0] not in COMMANDS:
        what = "option" if args[0].startswith("-") else "command"
        return _fail(f"No such {what} {args[0]!r}: run `ktune --help` for the commands.", 2)
    try:
        command = load(args[0])
        code = command.main(args=args[1:], prog_name=f"ktune {args[0]}", standalone_mode=False)
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        if _is(exc, ("typer", "Abort")):
            return _fail("aborted", 130)
        if _is(exc, ("typer", "TyperException")):
            # usage errors: unknown option, bad value, ...
            message = exc.format_message()  # type: ignore[attr-defined]
            if not message:  # no arguments: the help was printed
                return 0
            return _fail(message, int(exc.exit_code))  # type: ignore[attr-defined]
        if os.environ.get("KTUNE_DEBUG"):
            raise
        if isinstance(exc, DatabaseError):
            return _fail(
                str(exc), 2 if isinstance(exc, DatabaseInputError) else EXIT_LOG_UNAVAILABLE
            )
        if isinstance(exc, ValueError):
            # Every input error of ours derives from ValueError and carries a one-line message.
            return _fail(str(exc), 2)
        if _is(exc, ("ktune.tuner.measure.base", "BackendError")):
            return _fail(str(exc), 1)
        raise
    return code if isinstance(code, int) else 0


def _is(exc: BaseException, *names: tuple[str, str]) -> bool:
    """Whether ``exc`` is one of the classes ``(module, name)``; a module not loaded yet has
    raised nothing (so Typer and the backends are not imported to tell)."""
    for module, name in names:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return True
    return False


def _fail(message: str, code: int) -> int:
    """One line on stderr (plain text: no markup, no emoji codes) of at most about
    ``MAX_MESSAGE`` characters, and the exit code."""
    from ktune.search_space.excerpt import bounded  # the error path only: --help loads less

    print(f"error: {bounded(message)}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
