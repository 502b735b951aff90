"""The ``ktune`` group (``ktune.cli.app.app``), for tools that parse a command line as ktune
would (the compose test): it lists the commands of ``ktune.cli.app.COMMANDS`` from the table
and loads one when asked for it. ``ktune.cli.app.main`` runs commands without it; ``ktune
best`` is not a Typer command and runs only there."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from ktune.cli.app import COMMANDS, HELP, load

__all__ = ["app"]


class LazyGroup(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return load(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.help) for name, entry in COMMANDS.items()])


app = typer.Typer(
    name="ktune",
    help=HELP,
    cls=LazyGroup,
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def root(ctx: typer.Context) -> None:
    """Without a command: the help (exit 0)."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
