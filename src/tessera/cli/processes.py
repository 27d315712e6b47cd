"""The long-running commands: the API server, the job worker and the dev chain."""

import asyncio
from typing import Annotated

import typer

from tessera.cli.common import configure_logging, job_context, run
from tessera.config import Settings, get_settings
from tessera.db import Database


def serve(
    host: Annotated[str | None, typer.Option(help="Default TESSERA_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default TESSERA_PORT.")] = None,
    workers: Annotated[int, typer.Option(help="Worker processes (stateless).")] = 1,
) -> None:
    """Run the HTTP API."""
    from tessera.passes.apple import WalletSettingsInvalid
    from tessera.passes.service import Wallets
    from tessera.web import server

    settings = get_settings()
    configure_logging(settings)
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


def worker() -> None:
    """Run a job worker until interrupted (any number can run against PostgreSQL)."""
    import signal

    from tessera.main import make_worker

    async def work(database: Database, settings: Settings) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        context = job_context(database, settings)
        try:
            await make_worker(context, settings).run_forever(stop)
        finally:
            context.chains.close()

    run(work)


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
                    addresses = run(wallets)
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
