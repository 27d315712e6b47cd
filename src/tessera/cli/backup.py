"""``tessera backup create|verify|restore``: each prints its report as JSON on stdout, and an
error as one line on stderr with exit code 1, as the other commands do."""

import asyncio
import logging.config
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:  # imported by the commands, so that `tessera --help` starts fast
    from pydantic import BaseModel

    from tessera.backup.schemas import BackupChecked, Manifest
    from tessera.config import Settings

M = TypeVar("M", bound="BaseModel")

app = typer.Typer(
    no_args_is_help=True,
    help="Backups: a consistent copy taken while serving, verified with the key ring, "
    "restored into an empty database (docs/operations.md).",
)

NewPath = Annotated[Path, typer.Argument(help="A new directory: the backup.")]
BackupPath = Annotated[
    Path, typer.Argument(help="A backup's directory.", exists=True, file_okay=False)
]


@app.command("create")
def create(path: NewPath) -> None:
    """Back up the configured database while it serves: its data and manifest.json into PATH.
    The key ring (TESSERA_SECRET_KEYS) is not in it: keep it apart, and with every backup."""
    from tessera.backup import service
    from tessera.db import Database

    async def work(settings: "Settings") -> "Manifest":
        database = Database.from_settings(settings, session=True)
        try:
            return await service.create(database, path)
        finally:
            await database.dispose()

    _run(work)


@app.command("verify")
def verify(path: BackupPath) -> None:
    """Check a backup: its manifest and checksum, its schema revision, and every sealed secret
    opened with TESSERA_SECRET_KEYS, restored into a scratch database (a PostgreSQL dump: a
    temporary database on the configured server, whose role needs CREATEDB)."""
    from tessera.backup import service
    from tessera.toolkit.crypto import SecretBox

    async def work(settings: "Settings") -> "BackupChecked":
        box = SecretBox(settings.key_ring)
        return await service.verify(box, settings.session_database_url, path)

    _run(work)


@app.command("restore")
def restore(path: BackupPath) -> None:
    """Restore a backup into the configured database, which must be empty (one with any table
    is refused and left as it was), checked as verify does. Then `tessera db upgrade` when the
    backup's schema is older than this Tessera's, and `tessera chain reconcile`."""
    from tessera.backup import service
    from tessera.toolkit.crypto import SecretBox

    async def work(settings: "Settings") -> "BackupChecked":
        box = SecretBox(settings.key_ring)
        return await service.restore(box, settings.session_database_url, path)

    checked = _run(work)
    if checked.schema_head != checked.code_head:
        typer.echo(
            f"next: tessera db upgrade (the backup's schema is at {checked.schema_head}, this "
            f"Tessera's at {checked.code_head})",
            err=True,
        )


def _run(work: Callable[["Settings"], Coroutine[object, object, M]]) -> M:
    """Run a command's work with the configured settings; print its report, or its error."""
    from tessera.backup.service import BackupInvalid
    from tessera.config import get_settings
    from tessera.db.dumps import DumpFailed
    from tessera.errors import AppError
    from tessera.toolkit import logs

    settings = get_settings()
    logging.config.dictConfig(logs.configuration(settings))
    try:
        done = asyncio.run(work(settings))
    except (BackupInvalid, DumpFailed) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except AppError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    typer.echo(done.model_dump_json(indent=2))
    return done
