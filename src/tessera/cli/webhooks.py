"""``tessera webhook``: a project's webhook endpoints; ``tessera operator``: the console's
operators."""

import uuid
from typing import Annotated

import typer
from pydantic import BaseModel

from tessera.cli.common import ProjectOpt, project_principal, run, show, validated
from tessera.config import Settings
from tessera.db import Database
from tessera.toolkit.crypto import SecretBox

app = typer.Typer(
    no_args_is_help=True, help="Webhook endpoints of a project (signed change deliveries)."
)
operator_app = typer.Typer(no_args_is_help=True, help="Operators of the console (/console).")


@app.command("create")
def webhook_create(
    project: ProjectOpt,
    url: Annotated[str, typer.Option("--url", help="https, on a public address.")],
    event_types: Annotated[
        list[str] | None,
        typer.Option("--event-type", help="Repeat for each type; none: every type."),
    ] = None,
) -> None:
    """Register an endpoint; prints it with its signing secret (shown once)."""
    from tessera.webhooks.schemas import WebhookCreate
    from tessera.webhooks.service import create_webhook

    async def work(database: Database, settings: Settings) -> BaseModel:
        body = validated(WebhookCreate, {"url": url, "event_types": event_types or None})
        return await create_webhook(
            database,
            await project_principal(database, project),
            body=body,
            box=SecretBox(settings.key_ring),
            allow_private=settings.webhooks_allow_private,
        )

    show(run(work))


@app.command("list")
def webhook_list(project: ProjectOpt) -> None:
    """The project's endpoints (never their secrets)."""
    from tessera.schemas import MAX_LIMIT, PageParams
    from tessera.webhooks.schemas import WebhookRead
    from tessera.webhooks.service import list_webhooks

    async def work(database: Database, _settings: Settings) -> list[WebhookRead]:
        principal = await project_principal(database, project)
        found: list[WebhookRead] = []
        page = 1
        while True:
            listed = await list_webhooks(
                database, principal, paging=PageParams(page=page, limit=MAX_LIMIT)
            )
            found += listed.webhooks
            if len(found) >= listed.pagination.total or not listed.webhooks:
                return found
            page += 1

    show(run(work))


@app.command("delete")
def webhook_delete(
    project: ProjectOpt, endpoint_id: Annotated[uuid.UUID, typer.Option("--id")]
) -> None:
    """Delete an endpoint and its delivery attempts."""
    from tessera.webhooks.service import delete_webhook

    async def work(database: Database, _settings: Settings) -> None:
        principal = await project_principal(database, project)
        await delete_webhook(database, principal, endpoint_id=endpoint_id)

    run(work)
    typer.echo(f"deleted {endpoint_id}", err=True)


@operator_app.command("create")
def operator_create(
    email: Annotated[str, typer.Option("--email", help="The operator's sign-in email.")],
) -> None:
    """Create a console operator (sees every project). The password comes from
    TESSERA_OPERATOR_PASSWORD, or is asked for on a terminal (at least 12 characters)."""
    import os
    import sys

    from tessera.console.service import create_operator

    password = os.environ.get("TESSERA_OPERATOR_PASSWORD")
    if password is None:
        if not sys.stdin.isatty():
            typer.echo("error: set TESSERA_OPERATOR_PASSWORD, or run on a terminal", err=True)
            raise typer.Exit(1)
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)

    async def work(database: Database, _settings: Settings) -> BaseModel:
        from tessera.console.schemas import OperatorRead

        created = await create_operator(database, email=email, password=password)
        return OperatorRead.model_validate(created)

    show(run(work))
