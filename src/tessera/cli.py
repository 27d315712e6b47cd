"""The ``tessera`` command: serve, migrate, and manage projects and credentials.

Every command reads the same settings as the server (``TESSERA_DATABASE_URL``, ...). Commands
that print credentials print JSON on stdout and nothing else, so scripts can parse it.
"""

import asyncio
import logging
import logging.config
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NamedTuple, TypeVar

import typer
from pydantic import BaseModel, TypeAdapter

from tessera import logs
from tessera.backup.cli import app as backup_app
from tessera.config import Settings, get_settings
from tessera.crypto import SecretBox
from tessera.db import Database
from tessera.errors import AppError
from tessera.models import JobStatus

if TYPE_CHECKING:  # the commands import what they need, so that `tessera --help` starts fast
    from rich.table import Table

    from tessera.auth.principal import Principal
    from tessera.chain.registry import Chains
    from tessera.jobs.worker import JobContext

app = typer.Typer(no_args_is_help=True, help="Tessera: event tickets, perks and user wallets.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
project_app = typer.Typer(no_args_is_help=True, help="Projects.")
apikey_app = typer.Typer(no_args_is_help=True, help="API keys of a project.")
client_app = typer.Typer(
    no_args_is_help=True, help="Token clients of a project (client credentials for tokens)."
)
identity_app = typer.Typer(no_args_is_help=True, help="External identities (OIDC subjects).")
secrets_app = typer.Typer(no_args_is_help=True, help="Secrets at rest (TESSERA_SECRET_KEYS).")
operator_app = typer.Typer(no_args_is_help=True, help="Operators of the console (/console).")
webhook_app = typer.Typer(
    no_args_is_help=True, help="Webhook endpoints of a project (signed change deliveries)."
)
jobs_app = typer.Typer(
    no_args_is_help=True, help="Durable jobs (NFT collections, mints, transfers)."
)
chain_app = typer.Typer(no_args_is_help=True, help="NFTs on chain, compared with the database.")
app.add_typer(db_app, name="db")
app.add_typer(project_app, name="project")
app.add_typer(apikey_app, name="apikey")
app.add_typer(client_app, name="client")
app.add_typer(identity_app, name="identity")
app.add_typer(jobs_app, name="jobs")
app.add_typer(chain_app, name="chain")
app.add_typer(webhook_app, name="webhook")
app.add_typer(operator_app, name="operator")
app.add_typer(secrets_app, name="secrets")
app.add_typer(backup_app, name="backup")

ProjectOpt = Annotated[uuid.UUID, typer.Option("--project", help="Project id.")]
PermissionOpt = Literal["read", "write"]
# An API key's: ``checkin`` is the door's (scan, annul, upload scans, read the sync; 403 elsewhere).
KeyPermissionOpt = Literal["read", "write", "checkin"]
T = TypeVar("T")


def _print(data: BaseModel | Sequence[BaseModel]) -> None:
    """A schema's JSON dump on stdout, the only thing a command prints there."""
    if isinstance(data, BaseModel):
        typer.echo(data.model_dump_json(indent=2))
    else:
        typer.echo(TypeAdapter(type(data)).dump_json(data, indent=2).decode())


def _configure_logging(settings: Settings) -> None:
    # JSON lines on stderr, or text on a terminal (tessera.logs); `serve` hands the same
    # configuration to uvicorn, for each worker process.
    logging.config.dictConfig(logs.configuration(settings))


def _run(work: Callable[[Database, Settings], Awaitable[T]]) -> T:
    settings = get_settings()
    _configure_logging(settings)

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


def _validated(model: type[M], data: dict[str, object]) -> M:
    """Options checked by the API's own schema: the same problems, as ``error: ...``."""
    from pydantic import ValidationError

    from tessera.errors import InvalidInput, validation_messages

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(*validation_messages(exc.errors())) from None


def _hash_key(settings: Settings) -> bytes:
    return settings.hash_key_bytes


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Default TESSERA_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default TESSERA_PORT.")] = None,
    workers: Annotated[int, typer.Option(help="Worker processes (stateless).")] = 1,
) -> None:
    """Run the HTTP API."""
    from tessera import server
    from tessera.passes.apple import WalletSettingsInvalid
    from tessera.passes.service import Wallets

    settings = get_settings()
    _configure_logging(settings)
    try:  # each server process reads them again; a file that is wrong stops it here, plainly
        Wallets.load(settings)
    except WalletSettingsInvalid as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    host, port = host or settings.host, port or settings.port
    typer.echo(f"Tessera API at http://{host}:{port}/v1 (docs: http://{host}:{port}/docs)")
    typer.echo("Credentials: `tessera project create --name NAME` prints an API key and a client.")
    typer.echo(
        f"Console: http://{host}:{port}/console (first `tessera operator create --email EMAIL`)"
    )
    server.run(settings, host=host, port=port, workers=workers)


@db_app.command("upgrade")
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

        if made := _run(work):
            typer.echo(f"check-in keys made for {made} projects that had none", err=True)


@db_app.command("status")
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


@project_app.command("create")
def project_create(name: Annotated[str, typer.Option("--name")]) -> None:
    """Create a project with a project wallet; prints its write API key and token client."""
    from tessera.projects.service import create_project

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await create_project(
            database,
            name=name,
            box=SecretBox(settings.key_ring),
            hash_key=_hash_key(settings),
            ss58_prefix=settings.ss58_prefix,
        )

    _print(_run(work))


@project_app.command("rotate-checkin-key")
def project_rotate_checkin_key(project: ProjectOpt) -> None:
    """A new check-in key signs the project's ticket secrets from now on (every process within
    10 s); the earlier keys keep verifying the secrets already handed out until retired."""
    from tessera.ticket_keys.service import rotate

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await rotate(database, SecretBox(settings.key_ring), project)

    _print(_run(work))


@project_app.command("retire-checkin-key")
def project_retire_checkin_key(
    project: ProjectOpt, kid: Annotated[str, typer.Option("--kid", help="The key's id.")]
) -> None:
    """The key verifies nothing from now on: every secret it signed is refused (revoked). Doors
    drop it at their next sync. Rotate first, and retire once the new key's secrets are out."""
    from tessera.ticket_keys.service import retire

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await retire(database, SecretBox(settings.key_ring), project, kid)

    _print(_run(work))


@project_app.command("checkin-keys")
def project_checkin_keys(project: ProjectOpt) -> None:
    """The project's check-in keys (public halves), newest first."""
    from tessera.ticket_keys.service import list_keys

    async def work(database: Database, _settings: Settings) -> Sequence[BaseModel]:
        return await list_keys(database, project)

    _print(_run(work))


@project_app.command("set")
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

    _print(_run(work))


@project_app.command("set-logo")
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

    _print(_run(work))


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
            hash_key=_hash_key(settings),
            expires_in=expires_in,
            name=name,
        )

    _print(_run(work))


@apikey_app.command("list")
def apikey_list(project: ProjectOpt) -> None:
    """List a project's keys (never the keys themselves)."""
    from tessera.projects.schemas import ApiKeyRead
    from tessera.projects.service import list_api_keys

    async def work(database: Database, _settings: Settings) -> list[ApiKeyRead]:
        keys = await list_api_keys(database, project_id=project)
        return [ApiKeyRead.model_validate(key) for key in keys]

    _print(_run(work))


@apikey_app.command("revoke")
def apikey_revoke(project: ProjectOpt, key_id: Annotated[uuid.UUID, typer.Option("--id")]) -> None:
    """Revoke a key at once."""
    from tessera.projects.schemas import ApiKeyRead
    from tessera.projects.service import revoke_api_key

    async def work(database: Database, _settings: Settings) -> ApiKeyRead:
        key = await revoke_api_key(database, project_id=project, key_id=key_id)
        return ApiKeyRead.model_validate(key)

    _print(_run(work))


ClientIdArg = Annotated[str, typer.Option("--client-id")]


@client_app.command("create")
def client_create(
    project: ProjectOpt, permission: Annotated[PermissionOpt, typer.Option("--permission")] = "read"
) -> None:
    """Create a token client (its secret is shown once)."""
    from tessera.projects.service import create_token_client

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await create_token_client(
            database, project_id=project, permission=permission, hash_key=_hash_key(settings)
        )

    _print(_run(work))


@client_app.command("list")
def client_list(project: ProjectOpt) -> None:
    """List a project's token clients (never their secrets)."""
    from tessera.projects.schemas import ClientRead
    from tessera.projects.service import list_token_clients

    async def work(database: Database, _settings: Settings) -> list[ClientRead]:
        clients = await list_token_clients(database, project_id=project)
        return [ClientRead.model_validate(client) for client in clients]

    _print(_run(work))


@client_app.command("revoke")
def client_revoke(project: ProjectOpt, client_id: ClientIdArg) -> None:
    """Revoke a client: no new token, and its tokens stop working within 2 s."""
    from tessera.projects.schemas import ClientRead
    from tessera.projects.service import revoke_token_client

    async def work(database: Database, _settings: Settings) -> ClientRead:
        client = await revoke_token_client(database, project_id=project, client_id=client_id)
        return ClientRead.model_validate(client)

    _print(_run(work))


@client_app.command("rotate")
def client_rotate(project: ProjectOpt, client_id: ClientIdArg) -> None:
    """Give a client a new secret (shown once): the old secret and the tokens issued with it
    stop working within 2 s."""
    from tessera.projects.service import rotate_token_client

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await rotate_token_client(
            database, project_id=project, client_id=client_id, hash_key=_hash_key(settings)
        )

    _print(_run(work))


@app.command()
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

    typer.echo(_run(work))


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

    _print(_run(work))


@app.command()
def demo(
    project: Annotated[
        uuid.UUID | None, typer.Option("--project", help="Fill this project (default: a new one).")
    ] = None,
) -> None:
    """Fill a project with sample users, events, products, items and orders."""
    from tessera.demo import fill

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await fill(database, settings, project_id=project)

    _print(_run(work))


def _job_context(database: Database, settings: Settings) -> "JobContext":
    from tessera.chain.registry import Chains
    from tessera.jobs.worker import JobContext

    return JobContext(database, SecretBox(settings.key_ring), Chains(settings))


async def _project_principal(database: Database, project: uuid.UUID) -> "Principal":
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


@webhook_app.command("create")
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
        body = _validated(WebhookCreate, {"url": url, "event_types": event_types or None})
        return await create_webhook(
            database,
            await _project_principal(database, project),
            body=body,
            box=SecretBox(settings.key_ring),
            allow_private=settings.webhooks_allow_private,
        )

    _print(_run(work))


@webhook_app.command("list")
def webhook_list(project: ProjectOpt) -> None:
    """The project's endpoints (never their secrets)."""
    from tessera.schemas import MAX_LIMIT, PageParams
    from tessera.webhooks.schemas import WebhookRead
    from tessera.webhooks.service import list_webhooks

    async def work(database: Database, _settings: Settings) -> list[WebhookRead]:
        principal = await _project_principal(database, project)
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

    _print(_run(work))


@webhook_app.command("delete")
def webhook_delete(
    project: ProjectOpt, endpoint_id: Annotated[uuid.UUID, typer.Option("--id")]
) -> None:
    """Delete an endpoint and its delivery attempts."""
    from tessera.webhooks.service import delete_webhook

    async def work(database: Database, _settings: Settings) -> None:
        principal = await _project_principal(database, project)
        await delete_webhook(database, principal, endpoint_id=endpoint_id)

    _run(work)
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

    _print(_run(work))


@app.command()
def worker() -> None:
    """Run a job worker until interrupted (any number can run against PostgreSQL)."""
    import signal

    from tessera.main import make_worker

    async def work(database: Database, settings: Settings) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        context = _job_context(database, settings)
        try:
            await make_worker(context, settings).run_forever(stop)
        finally:
            context.chains.close()

    _run(work)


@jobs_app.command("list")
def jobs_list(
    status: Annotated[JobStatus | None, typer.Option(help="Only jobs of this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
) -> None:
    """The newest jobs, optionally of one status."""
    from tessera.jobs.schemas import JobRead
    from tessera.jobs.service import list_jobs

    async def work(database: Database, _settings: Settings) -> list[JobRead]:
        jobs = await list_jobs(database, status=status, limit=limit)
        return [JobRead.model_validate(job) for job in jobs]

    _print(_run(work))


@jobs_app.command("retry")
def jobs_retry(job_id: Annotated[uuid.UUID, typer.Argument(help="Job id.")]) -> None:
    """Queue a job again with fresh attempts (and its item or product back to queued)."""
    from tessera.jobs.schemas import JobRead
    from tessera.jobs.service import retry_job
    from tessera.main import job_handlers

    async def work(database: Database, settings: Settings) -> JobRead:
        context = _job_context(database, settings)
        job = await retry_job(context, job_handlers(), job_id=job_id)
        return JobRead.model_validate(job)

    _print(_run(work))


UNBOUNDED = 10_000  # columns


class ProductCheck(NamedTuple):
    """One product's line of ``tessera chain reconcile``: its findings by kind, and with
    ``--repair`` the actions they got by (kind, action); ``report`` is reported only, no job."""

    product_id: uuid.UUID
    items_checked: int
    findings: Counter[str]
    actions: Counter[tuple[str, str]]


@chain_app.command("reconcile")
def chain_reconcile(
    project: ProjectOpt,
    product: Annotated[
        uuid.UUID | None,
        typer.Option("--product", help="This product only (default: each mint_nft product)."),
    ] = None,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Queue each finding's repair as a job, for the worker."),
    ] = False,
) -> None:
    """Compare the project's NFTs with the chain, product by product, recording each result as
    GET /v1/products/{id}/reconciliation does; prints a table of the findings by kind. Exits 1
    when a product has a finding (a repair queued is not done yet: check again once the worker
    has run it), 0 when everything agrees."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tessera.chain.registry import Chains
    from tessera.reconciliation.repository import nft_products

    async def work(database: Database, settings: Settings) -> list[ProductCheck]:
        await _project_principal(database, project)  # 404 for no such project
        ids = [product] if product else await database.read(nft_products, project)
        chains = Chains(settings)
        checks: list[ProductCheck] = []
        # On a terminal's stderr, and gone once done: stdout carries the table only.
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        shown_on = Console(stderr=True)
        progress = Progress(
            *columns, console=shown_on, transient=True, disable=not shown_on.is_terminal
        )
        try:
            with progress:
                task = progress.add_task("reconciling", total=len(ids))
                for product_id in ids:
                    progress.update(task, description=f"reconciling {product_id}")
                    checks.append(
                        await _check_product(database, chains, project, product_id, repair=repair)
                    )
                    progress.advance(task)
        finally:
            chains.close()
        return checks

    checks = _run(work)
    table = _reconciliation_table(project, checks, repair=repair)
    console = Console()
    if not console.is_terminal:  # a pipe or a file: the whole table, never wrapped at 80
        unbounded = console.options.update_width(UNBOUNDED)
        console = Console(width=console.measure(table, options=unbounded).maximum)
    console.print(table)
    if any(check.findings for check in checks):
        raise typer.Exit(1)


async def _check_product(
    database: Database, chains: "Chains", project: uuid.UUID, product_id: uuid.UUID, *, repair: bool
) -> ProductCheck:
    from tessera.reconciliation import service

    if not repair:
        shown = (await service.reconcile(database, chains, project, product_id)).shown
        kinds = Counter(finding.kind.value for finding in shown.findings)
        return ProductCheck(product_id, shown.items_checked, kinds, Counter())
    repaired = await service.repair(database, chains, project, product_id, dry_run=False)
    last = await database.read(service.last_reconciliation, project, product_id)
    assert last is not None  # the repair's own check
    return ProductCheck(
        product_id,
        last.items_checked,
        Counter(action.kind.value for action in repaired.actions),
        Counter((action.kind.value, action.action.value) for action in repaired.actions),
    )


def _reconciliation_table(
    project: uuid.UUID, checks: Sequence[ProductCheck], *, repair: bool
) -> "Table":
    from rich.table import Table

    from tessera.reconciliation.findings import Action, Kind

    def findings_cell(check: ProductCheck) -> str:
        """A line per kind found, in the order of ``Kind``."""
        kinds = [kind for kind in Kind if check.findings[kind]]
        return "\n".join(f"{kind}: {check.findings[kind]}" for kind in kinds) or "none"

    def actions_cell(check: ProductCheck) -> str:
        """The actions, each on the line of the kind they repair."""
        kinds = [kind for kind in Kind if check.findings[kind]]
        by_kind = [[(a, check.actions[kind, a]) for a in Action] for kind in kinds]
        return "\n".join(", ".join(f"{a}: {n}" for a, n in done if n) for done in by_kind) or "none"

    drifted = [check for check in checks if check.findings]
    found = sum(sum(check.findings.values()) for check in drifted)
    caption = (
        f"{found} finding(s) in {len(drifted)} of {len(checks)} product(s)"
        if drifted
        else f"no finding in {len(checks)} product(s)"
    )
    if any(action == Action.REPORT for check in checks for _, action in check.actions):
        caption += " (report: no job, an operator decides)"
    table = Table(title=f"Reconciliation of project {project}", caption=caption)
    table.add_column("product", no_wrap=True)
    table.add_column("items checked", justify="right")
    table.add_column("findings")
    if repair:
        table.add_column("actions queued")
    for check in checks:
        row = [str(check.product_id), str(check.items_checked), findings_cell(check)]
        if repair:
            row.append(actions_cell(check))
        table.add_row(*row)
    return table


@app.command()
def devchain(
    port: Annotated[int | None, typer.Option(help="Default TESSERA_DEVCHAIN_PORT.")] = None,
    fund: Annotated[
        int,
        typer.Option(
            help="Whole tokens each project wallet is kept at: topped up to this whenever it "
            "falls below half. 5,000 DOT pays some 20,000 NFTs with metadata (docs/chain.md)."
        ),
    ] = 5000,
) -> None:
    """Run a real Asset Hub runtime (Chopsticks) on 127.0.0.1 and keep the project wallets
    funded. Ctrl-C, SIGTERM or SIGHUP stops both, at any moment, with one line."""
    import time

    from tessera.chain import devchain as dc
    from tessera.projects.repository import all_wallet_addresses

    settings = get_settings()

    async def wallets(database: Database, _settings: Settings) -> list[str]:
        return await database.read(all_wallet_addresses)

    chain: dc.Devchain | None = None
    with dc.Stop().handling() as stop:
        try:
            spec, cache = dc.spec_path(settings), dc.cache_path(settings)
            if not spec.is_file():
                raise dc.DevchainUnavailable(
                    f"chain spec not found: {spec} (TESSERA_DEVCHAIN_SPEC)"
                )
            dc.install(cache)
            chain = dc.Devchain(spec, cache, port=port or settings.devchain_port)
            chain.start()
            decimals = int(str(chain.properties()["tokenDecimals"]))
            typer.echo(f"Asset Hub runtime at {chain.url}. In the shell that runs Tessera:")
            typer.echo(f"  export TESSERA_CHAIN_ASSETHUB_RPC_URL={chain.url}")
            typer.echo(f"  export TESSERA_CHAIN_WESTENDASSETHUB_RPC_URL={chain.url}")
            typer.echo(
                f"Project wallets are kept at {fund} tokens each (new ones within 5 s; topped up "
                f"below {fund // 2}). Ctrl-C stops."
            )
            while chain.process is not None and chain.process.poll() is None:
                with stop.deferred():  # an event loop: left whole
                    addresses = _run(wallets)
                for address in addresses:
                    if chain.keep_funded(address, fund * 10**decimals):
                        typer.echo(f"funded {address}: {fund} tokens")
                time.sleep(5)
            code = chain.process.returncode if chain.process is not None else None
            typer.echo(f"error: Chopsticks exited with {code}", err=True)
            raise typer.Exit(1)
        except dc.DevchainUnavailable as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("devchain stopped", err=True)
        finally:
            if chain is not None:
                chain.stop()


@secrets_app.command("rotate")
def secrets_rotate() -> None:
    """Re-seal every stored secret under the first key of TESSERA_SECRET_KEYS."""
    from tessera.keyring.service import reseal_all

    async def work(database: Database, settings: Settings) -> BaseModel:
        return await reseal_all(database, SecretBox(settings.key_ring))

    _print(_run(work))
