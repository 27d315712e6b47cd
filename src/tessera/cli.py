"""The ``tessera`` command: serve, migrate, and manage projects and credentials.

Every command reads the same settings as the server (``TESSERA_DATABASE_URL``, ...). Commands
that print credentials print JSON on stdout and nothing else, so scripts can parse it.
"""

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from tessera.auth.api_keys import create_api_key, list_api_keys, revoke_api_key
from tessera.auth.tokens import TokenIssuer, bind_identity
from tessera.config import Settings, get_settings
from tessera.crypto import SecretBox
from tessera.db import Database
from tessera.errors import AppError

app = typer.Typer(no_args_is_help=True, help="Tessera: event tickets, perks and user wallets.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
project_app = typer.Typer(no_args_is_help=True, help="Projects.")
apikey_app = typer.Typer(no_args_is_help=True, help="API keys of a project.")
identity_app = typer.Typer(no_args_is_help=True, help="External identities (OIDC subjects).")
secrets_app = typer.Typer(no_args_is_help=True, help="Secrets at rest (TESSERA_SECRET_KEYS).")
jobs_app = typer.Typer(
    no_args_is_help=True, help="Durable jobs (NFT collections, mints, transfers)."
)
app.add_typer(db_app, name="db")
app.add_typer(project_app, name="project")
app.add_typer(apikey_app, name="apikey")
app.add_typer(identity_app, name="identity")
app.add_typer(jobs_app, name="jobs")
app.add_typer(secrets_app, name="secrets")

ProjectOpt = Annotated[uuid.UUID, typer.Option("--project", help="Project id.")]
PermissionOpt = Literal["read", "write"]
MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def _print(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _configure_logging(settings: Settings) -> None:
    # Records carry ids and error texts only: secrets are SecretStr or sealed, never logged.
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s"
    )


def _run(work: Callable[[Database, Settings], Awaitable[Any]]) -> Any:
    settings = get_settings()
    _configure_logging(settings)

    async def main() -> Any:
        database = Database(settings.database_url)
        try:
            return await work(database, settings)
        finally:
            await database.dispose()

    try:
        return asyncio.run(main())
    except AppError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


def _hash_key(settings: Settings) -> bytes:
    return settings.hash_key.get_secret_value().encode()


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Default TESSERA_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default TESSERA_PORT.")] = None,
    workers: Annotated[int, typer.Option(help="Worker processes (stateless).")] = 1,
) -> None:
    """Run the HTTP API."""
    import uvicorn

    settings = get_settings()
    _configure_logging(settings)
    host, port = host or settings.host, port or settings.port
    typer.echo(f"Tessera API at http://{host}:{port}/v1 (docs: http://{host}:{port}/docs)")
    typer.echo("Credentials: `tessera project create --name NAME` prints an API key and a client.")
    uvicorn.run(
        "tessera.main:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        loop="uvloop",
        http="httptools",
        log_level=settings.log_level,
        proxy_headers=False,
    )


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (default head)."""
    from alembic import command
    from alembic.config import Config

    config = Config(str(MIGRATIONS.parent / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = get_settings().database_url
    command.upgrade(config, revision)


@project_app.command("create")
def project_create(name: Annotated[str, typer.Option("--name")]) -> None:
    """Create a project with a project wallet; prints its write API key and token client."""
    from tessera.projects.service import create_project

    async def work(database: Database, settings: Settings) -> Any:
        async with database.session() as session:
            return await create_project(
                session,
                name=name,
                box=SecretBox(settings.key_ring),
                hash_key=_hash_key(settings),
                ss58_prefix=settings.ss58_prefix,
            )

    created = _run(work)
    _print(
        {
            "project_id": created.project_id,
            "api_key": created.api_key,
            "client_id": created.client_id,
            "client_secret": created.client_secret,
        }
    )


@apikey_app.command("create")
def apikey_create(
    project: ProjectOpt,
    permission: Annotated[PermissionOpt, typer.Option("--permission")] = "read",
    expires_in: Annotated[int | None, typer.Option("--expires-in", min=1, help="Seconds.")] = None,
    name: Annotated[str | None, typer.Option("--name")] = None,
) -> None:
    """Issue an API key (shown once)."""

    async def work(database: Database, settings: Settings) -> Any:
        async with database.session() as session:
            issued = await create_api_key(
                session,
                project_id=project,
                permission=permission,
                hash_key=_hash_key(settings),
                expires_in=expires_in,
                name=name,
            )
            await session.commit()
            return issued

    issued = _run(work)
    _print(
        {
            "id": issued.row.id,
            "api_key": issued.api_key,
            "permission": issued.row.permission,
            "expires_at": issued.row.expires_at.isoformat() if issued.row.expires_at else None,
        }
    )


@apikey_app.command("list")
def apikey_list(project: ProjectOpt) -> None:
    """List a project's keys (never the keys themselves)."""

    async def work(database: Database, _settings: Settings) -> Any:
        async with database.session(write=False) as session:
            return await list_api_keys(session, project_id=project)

    _print(
        [
            {
                "id": key.id,
                "prefix": key.prefix,
                "name": key.name,
                "permission": key.permission,
                "created_at": key.created_at,
                "expires_at": key.expires_at,
                "revoked_at": key.revoked_at,
                "last_used_at": key.last_used_at,
            }
            for key in _run(work)
        ]
    )


@apikey_app.command("revoke")
def apikey_revoke(project: ProjectOpt, key_id: Annotated[uuid.UUID, typer.Option("--id")]) -> None:
    """Revoke a key at once."""

    async def work(database: Database, _settings: Settings) -> None:
        async with database.session() as session:
            await revoke_api_key(session, project_id=project, key_id=key_id)
            await session.commit()

    _run(work)
    _print({"id": key_id, "revoked": True})


@app.command()
def token(
    project: ProjectOpt,
    scope: Annotated[PermissionOpt, typer.Option("--scope")] = "write",
    ttl: Annotated[int | None, typer.Option("--ttl", min=60, help="Seconds.")] = None,
) -> None:
    """Print a bearer token for a project, signed by Tessera's own issuer."""

    async def work(database: Database, settings: Settings) -> str:
        async with database.session() as session:
            issuer = TokenIssuer(settings, SecretBox(settings.key_ring))
            jwt, _ = await issuer.mint(
                session, project_id=project, scope=scope, subject="cli", ttl=ttl
            )
            return jwt

    typer.echo(_run(work))


@identity_app.command("bind")
def identity_bind(
    project: ProjectOpt,
    issuer: Annotated[str, typer.Option("--issuer")],
    subject: Annotated[str, typer.Option("--subject")],
    permission: Annotated[PermissionOpt, typer.Option("--permission")] = "write",
) -> None:
    """Bind an external OIDC identity (issuer + subject) to a project."""

    async def work(database: Database, _settings: Settings) -> Any:
        async with database.session() as session:
            binding = await bind_identity(
                session, project_id=project, issuer=issuer, subject=subject, permission=permission
            )
            await session.commit()
            return binding

    binding = _run(work)
    _print(
        {
            "project_id": binding.project_id,
            "issuer": binding.issuer,
            "subject": binding.subject,
            "permission": binding.permission,
        }
    )


@app.command()
def demo(
    project: Annotated[
        uuid.UUID | None, typer.Option("--project", help="Fill this project (default: a new one).")
    ] = None,
) -> None:
    """Fill a project with sample users, events, products, items and orders."""
    from tessera.demo import fill

    async def work(database: Database, settings: Settings) -> Any:
        return await fill(database, settings, project_id=project)

    _print(_run(work))


def _worker(database: Database, settings: Settings) -> Any:
    from tessera.chain.registry import Chains
    from tessera.jobs.worker import Worker

    return Worker(database, settings, SecretBox(settings.key_ring), Chains(settings))


@app.command()
def worker() -> None:
    """Run a job worker until interrupted (any number can run against PostgreSQL)."""
    import signal

    async def work(database: Database, settings: Settings) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        runner = _worker(database, settings)
        try:
            await runner.run_forever(stop)
        finally:
            runner.chains.close()

    _run(work)


@jobs_app.command("list")
def jobs_list(
    status: Annotated[str | None, typer.Option(help="queued, running, succeeded or failed")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
) -> None:
    """The newest jobs, optionally of one status."""
    from sqlalchemy import select

    from tessera.models import Job

    async def work(database: Database, _settings: Settings) -> Any:
        statement = select(Job).order_by(Job.created_at.desc()).limit(limit)
        if status:
            statement = statement.where(Job.status == status)
        async with database.session(write=False) as session:
            return list(await session.scalars(statement))

    _print(
        [
            {
                "id": job.id,
                "kind": job.kind,
                "subject": job.subject,
                "status": job.status,
                "attempts": job.attempts,
                "run_after": job.run_after,
                "last_error": job.last_error,
                "created_at": job.created_at,
            }
            for job in _run(work)
        ]
    )


@jobs_app.command("retry")
def jobs_retry(job_id: Annotated[uuid.UUID, typer.Argument(help="Job id.")]) -> None:
    """Queue a job again with fresh attempts (and its item or product back to queued)."""
    from tessera.jobs.worker import retry_job

    async def work(database: Database, settings: Settings) -> Any:
        return await retry_job(database, _worker(database, settings), job_id)

    job = _run(work)
    if job is None:
        typer.echo("error: job not found", err=True)
        raise typer.Exit(1)
    _print({"id": job.id, "status": job.status})


@app.command()
def devchain(
    port: Annotated[int | None, typer.Option(help="Default TESSERA_DEVCHAIN_PORT.")] = None,
    fund: Annotated[int, typer.Option(help="Whole tokens for each project wallet.")] = 100,
) -> None:
    """Run a real Asset Hub runtime (Chopsticks) on 127.0.0.1 and fund the project wallets."""
    import time

    from sqlalchemy import select

    from tessera.chain import devchain as dc
    from tessera.models import ProjectWallet

    settings = get_settings()
    dc.install()
    chain = dc.Devchain(settings.devchain_spec, port=port or settings.devchain_port).start()
    decimals = int(chain.rpc("system_properties", [])["tokenDecimals"])  # type: ignore[index]
    typer.echo(f"Asset Hub runtime at {chain.url}. In the shell that runs Tessera:")
    typer.echo(f"  export TESSERA_CHAIN_ASSETHUB_RPC_URL={chain.url}")
    typer.echo(f"  export TESSERA_CHAIN_WESTENDASSETHUB_RPC_URL={chain.url}")
    typer.echo(f"Project wallets get {fund} tokens each (new ones within 5 s). Ctrl-C stops.")

    async def wallets(database: Database, _settings: Settings) -> list[str]:
        async with database.session(write=False) as session:
            return list(await session.scalars(select(ProjectWallet.address)))

    funded: set[str] = set()
    try:
        while chain.process is not None and chain.process.poll() is None:
            for address in set(_run(wallets)) - funded:
                chain.fund(address, fund * 10**decimals)
                funded.add(address)
                typer.echo(f"funded {address}")
            time.sleep(5)
    except KeyboardInterrupt:
        pass
    finally:
        chain.stop()


@secrets_app.command("rotate")
def secrets_rotate() -> None:
    """Re-seal every stored secret under the first key of TESSERA_SECRET_KEYS."""
    from tessera.keyring import reseal_all

    async def work(database: Database, settings: Settings) -> Any:
        return await reseal_all(database, SecretBox(settings.key_ring))

    resealed = _run(work)
    _print(
        {
            "active_key_id": next(iter(get_settings().key_ring)),
            "user_wallets": resealed.user_wallets,
            "project_wallets": resealed.project_wallets,
            "signing_keys": resealed.signing_keys,
        }
    )
