"""``tessera db``: the schema (upgrade, status); ``tessera secrets``: secrets at rest."""

import typer
from pydantic import BaseModel

from tessera.cli.common import run, show
from tessera.config import Settings, get_settings
from tessera.db import Database
from tessera.toolkit.crypto import SecretBox

app = typer.Typer(no_args_is_help=True, help="Database schema.")
secrets_app = typer.Typer(no_args_is_help=True, help="Secrets at rest (TESSERA_SECRET_KEYS).")


@app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (default head). At head, a project without a live
    check-in key (made before a project's first key was made with it) then gets one, sealed
    with TESSERA_SECRET_KEYS: a key cannot be sealed in a migration, which has no key ring."""
    from tessera import migrations
    from tessera.ticket_keys.service import key_every_project

    migrations.upgrade(get_settings().session_database_url, revision)
    if revision == "head":

        async def work(database: Database, settings: Settings) -> int:
            return await key_every_project(database, SecretBox(settings.key_ring))

        if made := run(work):
            typer.echo(f"check-in keys made for {made} projects that had none", err=True)


@app.command("status")
def db_status() -> None:
    """Print the database's revision, the code's head and each pending migration (oldest
    first). Exit code 0 when up to date, 3 when an upgrade is pending, 4 when a newer release
    migrated the database: a deploy script can wait on it (docs/upgrades.md)."""
    from sqlalchemy.exc import SQLAlchemyError

    from tessera import migrations

    url = get_settings().session_database_url
    try:
        status = migrations.status(url, connect_args=get_settings().engine_connect_args(url))
    except (OSError, SQLAlchemyError) as exc:
        typer.echo(f"error: the database did not answer ({type(exc).__name__})", err=True)
        raise typer.Exit(1) from None
    typer.echo("\n".join(status.lines()))
    raise typer.Exit(status.exit_code)


@secrets_app.command("rotate")
def secrets_rotate() -> None:
    """Re-seal every stored secret under the first key of TESSERA_SECRET_KEYS."""
    from tessera.keyring.service import reseal_all

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await reseal_all(database, SecretBox(settings.key_ring))

    show(run(work))
