"""What the commands share: their settings, how they run a use-case, and how they print."""

import asyncio
import logging.config
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from pydantic import BaseModel, TypeAdapter

from tessera.config import Settings, get_settings
from tessera.db import Database
from tessera.errors import AppError
from tessera.toolkit import logs
from tessera.toolkit.crypto import SecretBox

if TYPE_CHECKING:  # the commands import what they need, so that `tessera --help` starts fast
    from tessera.auth.principal import Principal
    from tessera.jobs.worker import JobContext

ProjectOpt = Annotated[uuid.UUID, typer.Option("--project", help="Project id.")]
T = TypeVar("T")


def show(data: BaseModel | Sequence[BaseModel]) -> None:
    """A schema's JSON dump on stdout, the only thing a command prints there."""
    if isinstance(data, BaseModel):
        typer.echo(data.model_dump_json(indent=2))
    else:
        typer.echo(TypeAdapter(type(data)).dump_json(data, indent=2).decode())


def configure_logging(settings: Settings) -> None:
    # JSON lines on stderr, or text on a terminal (tessera.toolkit.logs); `serve` hands the same
    # configuration to uvicorn, for each worker process.
    logging.config.dictConfig(logs.configuration(settings))


def run(work: Callable[[Database, Settings], Awaitable[T]]) -> T:
    settings = get_settings()
    configure_logging(settings)

    async def main() -> T:
        database = Database.from_settings(settings)
        try:
            return await work(database, settings)
        finally:
            await database.dispose()

    try:
        return asyncio.run(main())
    except AppError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: dict[str, object]) -> M:
    """Options checked by the API's own schema: the same problems, as ``error: ...``."""
    from pydantic import ValidationError

    from tessera.errors import InvalidInput, validation_messages

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(*validation_messages(exc.errors())) from None


def job_context(database: Database, settings: Settings) -> "JobContext":
    from tessera.chain.registry import Chains
    from tessera.jobs.worker import JobContext

    return JobContext(database, SecretBox(settings.key_ring), Chains(settings))


async def project_principal(database: Database, project: uuid.UUID) -> "Principal":
    """The CLI acts for the project as its write credential would (404 for no such project)."""
    from tessera.auth.principal import Principal
    from tessera.projects.repository import get_project

    found = await database.read(get_project, project)
    return Principal(
        project_id=found.id,
        can_write=True,
        credential="cli",
        require_activation=found.require_activation,
        ticket_emails=found.ticket_emails,
    )
