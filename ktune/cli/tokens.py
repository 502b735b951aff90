"""``ktune token``: API tokens of the REST service, stored hashed in the tuning log."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ktune.cli.common import CliError, DbOption, err, open_log, out

__all__ = ["app"]

app = typer.Typer(help="API tokens of the REST service (stored hashed).", no_args_is_help=True)


@app.command("create")
def create(
    name: Annotated[
        str,
        typer.Argument(
            help="What the token is for, e.g. 'ci' or a team name (1 to 64 printable characters)."
        ),
    ],
    db: DbOption = None,
) -> None:
    """Create a token and print it once: only its hash is stored."""
    with open_log(db) as tlog:
        record, token = tlog.create_token(name)
    print(token)
    err.print(
        f"token {record.token_id} ({record.name!r}) created; it is shown only now", markup=False
    )


@app.command("list")
def list_(db: DbOption = None) -> None:
    """Tokens by id and name (never their secrets)."""
    with open_log(db) as tlog:
        rows = tlog.list_tokens()
    table = Table("id", "name", "created", "revoked")
    for t in rows:
        table.add_row(
            t.token_id,
            t.name,
            t.created_at.strftime("%Y-%m-%d %H:%M"),
            t.revoked_at.strftime("%Y-%m-%d %H:%M") if t.revoked_at else "-",
        )
    out.print(table if rows else "no API tokens in the tuning log")


@app.command("revoke")
def revoke(
    token: Annotated[str, typer.Argument(help="Token id (from `ktune token list`) or name.")],
    every: Annotated[
        bool,
        typer.Option("--all", help="Revoke every live token with this name (names may be shared)."),
    ] = False,
    db: DbOption = None,
) -> None:
    """Revoke a token by id or name; requests with it are refused from now on."""
    with open_log(db) as tlog:
        named = [t.token_id for t in tlog.list_tokens() if t.revoked_at is None and t.name == token]
        if len(named) > 1 and not every:
            raise CliError(
                f"{len(named)} live tokens are named {token!r} (ids {', '.join(named)}): "
                "revoke one by id, or every one with --all"
            )
        n = tlog.revoke_token(token)
    if n == 0:
        raise CliError(f"no live token with id or name {token!r}", 1)
    out.print(f"revoked {n} token(s)", markup=False)
