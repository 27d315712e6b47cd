"""``tessera project``, ``apikey``, ``client``, ``identity`` and ``token``: a project and the
credentials that act for it. What prints a credential prints JSON on stdout and nothing else."""

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import BaseModel

from tessera.cli.common import ProjectOpt, run, show
from tessera.config import Settings
from tessera.db import Database
from tessera.toolkit.crypto import SecretBox

app = typer.Typer(no_args_is_help=True, help="Projects.")
apikey_app = typer.Typer(no_args_is_help=True, help="API keys of a project.")
client_app = typer.Typer(
    no_args_is_help=True, help="Token clients of a project (client credentials for tokens)."
)
identity_app = typer.Typer(no_args_is_help=True, help="External identities (OIDC subjects).")

PermissionOpt = Literal["read", "write"]
# An API key's: ``checkin`` is the door's (scan, annul, upload scans, read the sync; 403 elsewhere).
KeyPermissionOpt = Literal["read", "write", "checkin"]


@app.command("create")
def project_create(name: Annotated[str, typer.Option("--name")]) -> None:
    """Create a project with a project wallet; prints its write API key and token client."""
    from tessera.projects.service import create_project

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await create_project(
            database,
            name=name,
            box=SecretBox(settings.key_ring),
            hash_key=settings.hash_key_bytes,
            ss58_prefix=settings.ss58_prefix,
        )

    show(run(work))


@app.command("rotate-checkin-key")
def project_rotate_checkin_key(project: ProjectOpt) -> None:
    """A new check-in key signs the project's ticket secrets from now on (every process within
    10 s); the earlier keys keep verifying the secrets already handed out until retired."""
    from tessera.ticket_keys.service import rotate

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await rotate(database, SecretBox(settings.key_ring), project)

    show(run(work))


@app.command("retire-checkin-key")
def project_retire_checkin_key(
    project: ProjectOpt, kid: Annotated[str, typer.Option("--kid", help="The key's id.")]
) -> None:
    """The key verifies nothing from now on: every secret it signed is refused (revoked). Doors
    drop it at their next sync. Rotate first, and retire once the new key's secrets are out."""
    from tessera.ticket_keys.service import retire

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await retire(database, SecretBox(settings.key_ring), project, kid)

    show(run(work))


@app.command("checkin-keys")
def project_checkin_keys(project: ProjectOpt) -> None:
    """The project's check-in keys (public halves), newest first."""
    from tessera.ticket_keys.service import list_keys

    async def work(database: Database, _settings: Settings) -> Sequence[BaseModel]:
        return await list_keys(database, project)

    show(run(work))


@app.command("set")
def project_set(
    project: ProjectOpt,
    require_activation: Annotated[
        bool | None,
        typer.Option(
            "--require-activation/--no-require-activation",
            help="Only activated users receive items, are registered as attendees and send "
            "transfers (Mufi's rule; off by default).",
        ),
    ] = None,
    ticket_emails: Annotated[
        bool | None,
        typer.Option(
            "--ticket-emails/--no-ticket-emails",
            help="Email users their tickets when they receive items (with TESSERA_SMTP_URL; "
            "off by default).",
        ),
    ] = None,
    paper: Annotated[
        Literal["a4", "letter"] | None,
        typer.Option("--paper", help="The paper of printable tickets' PDFs (a4 by default)."),
    ] = None,
    ticket_pdf_in_emails: Annotated[
        bool | None,
        typer.Option(
            "--ticket-pdf-in-emails/--no-ticket-pdf-in-emails",
            help="Attach each ticket's PDF to ticket emails (off by default; the emails link "
            "to it either way).",
        ),
    ] = None,
) -> None:
    """Change a project's rules; prints the project's settings. Running requests see the change
    within 2 s."""
    from tessera.projects.schemas import ProjectSettings
    from tessera.projects.service import set_project_rules

    async def work(database: Database, _settings: Settings) -> ProjectSettings:
        changed = await set_project_rules(
            database,
            project_id=project,
            require_activation=require_activation,
            ticket_emails=ticket_emails,
            paper=paper,
            ticket_pdf_in_emails=ticket_pdf_in_emails,
        )
        return ProjectSettings.model_validate(changed)

    show(run(work))


@app.command("set-logo")
def project_set_logo(
    project: ProjectOpt,
    png: Annotated[
        Path | None,
        typer.Argument(
            help="A PNG (at most 512 KiB, 4096 pixels a side); square works best.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Show Tessera's mark again.")] = False,
) -> None:
    """The logo on the project's wallet passes (their icon and logo), or Tessera's mark with
    --remove. The devices that keep the project's passes see them changed."""
    from tessera.passes.images import MAX_LOGO_BYTES
    from tessera.passes.schemas import PassLogo
    from tessera.passes.service import set_logo

    if (png is None) == (not remove):
        typer.echo("error: give a PNG file, or --remove", err=True)
        raise typer.Exit(1)
    if png is not None and png.stat().st_size > MAX_LOGO_BYTES:
        typer.echo(f"error: logo: at most {MAX_LOGO_BYTES // 1024} KiB", err=True)
        raise typer.Exit(1)
    data = png.read_bytes() if png is not None else None

    async def work(database: Database, _settings: Settings) -> PassLogo:
        await set_logo(database, project_id=project, png=data)
        return PassLogo(project_id=project, logo="tessera" if data is None else "project")

    show(run(work))


@apikey_app.command("create")
def apikey_create(
    project: ProjectOpt,
    permission: Annotated[KeyPermissionOpt, typer.Option("--permission")] = "read",
    expires_in: Annotated[int | None, typer.Option("--expires-in", min=1, help="Seconds.")] = None,
    name: Annotated[str | None, typer.Option("--name")] = None,
) -> None:
    """Issue an API key (shown once)."""
    from tessera.projects.service import issue_api_key

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await issue_api_key(
            database,
            project_id=project,
            permission=permission,
            hash_key=settings.hash_key_bytes,
            expires_in=expires_in,
            name=name,
        )

    show(run(work))


@apikey_app.command("list")
def apikey_list(project: ProjectOpt) -> None:
    """List a project's keys (never the keys themselves)."""
    from tessera.projects.schemas import ApiKeyRead
    from tessera.projects.service import list_api_keys

    async def work(database: Database, _settings: Settings) -> list[ApiKeyRead]:
        keys = await list_api_keys(database, project_id=project)
        return [ApiKeyRead.model_validate(key) for key in keys]

    show(run(work))


@apikey_app.command("revoke")
def apikey_revoke(project: ProjectOpt, key_id: Annotated[uuid.UUID, typer.Option("--id")]) -> None:
    """Revoke a key at once."""
    from tessera.projects.schemas import ApiKeyRead
    from tessera.projects.service import revoke_api_key

    async def work(database: Database, _settings: Settings) -> ApiKeyRead:
        key = await revoke_api_key(database, project_id=project, key_id=key_id)
        return ApiKeyRead.model_validate(key)

    show(run(work))


ClientIdArg = Annotated[str, typer.Option("--client-id")]


@client_app.command("create")
def client_create(
    project: ProjectOpt, permission: Annotated[PermissionOpt, typer.Option("--permission")] = "read"
) -> None:
    """Create a token client (its secret is shown once)."""
    from tessera.projects.service import create_token_client

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await create_token_client(
            database, project_id=project, permission=permission, hash_key=settings.hash_key_bytes
        )

    show(run(work))


@client_app.command("list")
def client_list(project: ProjectOpt) -> None:
    """List a project's token clients (never their secrets)."""
    from tessera.projects.schemas import ClientRead
    from tessera.projects.service import list_token_clients

    async def work(database: Database, _settings: Settings) -> list[ClientRead]:
        clients = await list_token_clients(database, project_id=project)
        return [ClientRead.model_validate(client) for client in clients]

    show(run(work))


@client_app.command("revoke")
def client_revoke(project: ProjectOpt, client_id: ClientIdArg) -> None:
    """Revoke a client: no new token, and its tokens stop working within 2 s."""
    from tessera.projects.schemas import ClientRead
    from tessera.projects.service import revoke_token_client

    async def work(database: Database, _settings: Settings) -> ClientRead:
        client = await revoke_token_client(database, project_id=project, client_id=client_id)
        return ClientRead.model_validate(client)

    show(run(work))


@client_app.command("rotate")
def client_rotate(project: ProjectOpt, client_id: ClientIdArg) -> None:
    """Give a client a new secret (shown once): the old secret and the tokens issued with it
    stop working within 2 s."""
    from tessera.projects.service import rotate_token_client

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await rotate_token_client(
            database, project_id=project, client_id=client_id, hash_key=settings.hash_key_bytes
        )

    show(run(work))


def token(
    project: ProjectOpt,
    scope: Annotated[PermissionOpt, typer.Option("--scope")] = "write",
    ttl: Annotated[int | None, typer.Option("--ttl", min=60, help="Seconds.")] = None,
) -> None:
    """Print a bearer token for a project, signed by Tessera's own issuer."""
    from tessera.auth.tokens import TokenIssuer
    from tessera.projects.service import issue_token

    async def work(database: Database, settings: Settings) -> str:
        issuer = TokenIssuer(settings, SecretBox(settings.key_ring))
        return await issue_token(database, issuer, project_id=project, scope=scope, ttl=ttl)

    typer.echo(run(work))


@identity_app.command("bind")
def identity_bind(
    project: ProjectOpt,
    issuer: Annotated[str, typer.Option("--issuer")],
    subject: Annotated[str, typer.Option("--subject")],
    permission: Annotated[PermissionOpt, typer.Option("--permission")] = "write",
) -> None:
    """Bind an external OIDC identity (issuer + subject) to a project."""
    from tessera.projects.schemas import IdentityBindingRead
    from tessera.projects.service import bind_identity

    async def work(database: Database, _settings: Settings) -> IdentityBindingRead:
        binding = await bind_identity(
            database, project_id=project, issuer=issuer, subject=subject, permission=permission
        )
        return IdentityBindingRead.model_validate(binding)

    show(run(work))


def demo(
    project: Annotated[
        uuid.UUID | None, typer.Option("--project", help="Fill this project (default: a new one).")
    ] = None,
) -> None:
    """Fill a project with sample users, events, products, items and orders."""
    from tessera.cli.samples import fill

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await fill(database, settings, project_id=project)

    show(run(work))
