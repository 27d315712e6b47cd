"""Application factory."""

import asyncio
import gc
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from tessera import API_VERSION
from tessera.api import ConstantAnswers, document, include_v1, index_router, version_router
from tessera.auth.dependencies import Authenticator
from tessera.auth.rate_limits import RateLimiter, SignInLimiter
from tessera.auth.router import router as auth_router
from tessera.chain.registry import Chains
from tessera.changes.service import purge_chore
from tessera.checkins.pages import router as scanner_router
from tessera.claims import pages as claim_pages
from tessera.claims.limiter import ClaimLimiter
from tessera.claims.router import public_router as claims_router
from tessera.config import Settings, get_settings
from tessera.console import door as console_door
from tessera.console import events as console_events
from tessera.console import jobs as console_jobs
from tessera.console import mail as console_mail
from tessera.console import products as console_products
from tessera.console import reconciliation as console_reconciliation
from tessera.console import seats as console_seats
from tessera.console import users as console_users
from tessera.console import waiting as console_waiting
from tessera.console import web as console
from tessera.console import webhooks as console_webhooks
from tessera.console.router import router as console_router
from tessera.db import Database, attach
from tessera.db import windows as rate_windows
from tessera.health.readiness import Readiness
from tessera.health.router import router as health_router
from tessera.idempotency.service import IdempotencyStore, purge_expired
from tessera.instruments.process import observe_pool_wait, observe_write_wait, sample_pool_until
from tessera.jobs.worker import Handlers, JobContext, Worker
from tessera.mail import sender as mail_sender
from tessera.mail.sender import Postman, TicketPdfs
from tessera.metrics.router import router as metrics_router
from tessera.metrics.service import wallet_balance_chore
from tessera.nfts import tasks as nft_tasks
from tessera.passes import pages as pass_pages
from tessera.passes.router import router as passkit_router
from tessera.passes.service import Wallets
from tessera.reconciliation import tasks as reconciliation_tasks
from tessera.reconciliation.tasks import reconcile_chore
from tessera.ticket_keys.service import Signers
from tessera.tickets import pages as ticket_pages
from tessera.tickets.service import ticket_pdfs
from tessera.toolkit.crypto import SecretBox
from tessera.waiting.tasks import offers_chore
from tessera.web import routing
from tessera.web.docs import ASSETS, SWAGGER_UI
from tessera.web.docs import router as docs_router
from tessera.web.errors import install_error_handlers
from tessera.web.middleware import RequestContextMiddleware
from tessera.web.pages import PACKAGE
from tessera.webhooks.addresses import url_pattern
from tessera.webhooks.dispatcher import Dispatcher
from tessera.webhooks.router import document_deliveries

log = logging.getLogger("tessera")

USAGE_FLUSH_SECONDS = 15.0

DESCRIPTION = """
Tessera: users with custodial Polkadot wallets, events and attendees, products, items, orders
and sales, scoped to the project of the caller's credential.

Send either an `x-api-key` header or an `Authorization: Bearer <JWT>` header. A read credential
gets 403 on writes. Errors are `{"errors": [...]}` (400) or `{"message": ...}` (all others).
"""


def job_handlers() -> Handlers:
    """Every kind of job the worker runs, by the domain that owns it."""
    return {**nft_tasks.HANDLERS, **reconciliation_tasks.HANDLERS}


# Housekeeping the worker does between jobs: (every so many seconds, what).
CHORES = [(600.0, purge_expired), (600.0, rate_windows.sweep)]


def pdfs_of(database: Database, signers: Signers) -> TicketPdfs:
    """What the mail sender attaches to a ticket email: the tickets' PDFs, as the tickets
    package renders them."""

    async def render(
        project_id: uuid.UUID, wanted: Sequence[tuple[uuid.UUID, int]]
    ) -> list[tuple[int, bytes]]:
        return await ticket_pdfs(database, signers, project_id=project_id, wanted=wanted)

    return render


def make_worker(context: JobContext, settings: Settings) -> Worker:
    chores = [
        *CHORES,
        purge_chore(settings.changes_retention_days),
        # The wallet balances shown by /metrics: chain reads, too slow for a scrape.
        wallet_balance_chore(context.chains),
    ]
    reconciliations = reconcile_chore(settings.reconcile_interval_seconds)
    if reconciliations is not None:
        chores.append(reconciliations)
    chores.append(mail_sender.purge_chore())
    # Waiting lists that move without a request: lapsed offers, seats that came back.
    chores.append(offers_chore(settings.hash_key_bytes))
    webhooks = Dispatcher.from_settings(context.database, context.box, settings)
    companions = [webhooks.run_forever]
    # Email, when the server sends it (TESSERA_SMTP_URL): docs/email.md.
    postman = Postman.from_settings(
        context.database,
        settings,
        ticket_pdfs=pdfs_of(context.database, Signers(context.box)),
    )
    if postman is not None:
        companions.append(postman.run_forever)
    return Worker.from_settings(
        context, job_handlers(), settings, chores=chores, companions=companions
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    if settings.uses_dev_secrets:
        log.warning(
            "using the dev placeholder secrets: set TESSERA_SECRET_KEYS and TESSERA_HASH_KEY"
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database.from_settings(
            settings, on_pool_wait=observe_pool_wait, on_write_wait=observe_write_wait
        )
        attach(app, database)
        app.state.readiness = Readiness(settings, database)
        app.state.idempotency = IdempotencyStore(
            database, ttl_seconds=settings.idempotency_ttl_seconds
        )
        stop = asyncio.Event()
        usage = asyncio.create_task(
            app.state.authenticator.usage.run(database, USAGE_FLUSH_SECONDS, stop)
        )
        pool_gauges = asyncio.create_task(sample_pool_until(database, stop))
        worker = None
        if settings.worker_in_process:
            runner = make_worker(JobContext(database, box, app.state.chains), settings)
            worker = asyncio.create_task(runner.run_forever(stop))
        # Everything built so far lives as long as the process: keep it out of the cyclic
        # garbage collector's full passes, which would otherwise walk all of it again and again
        # under load (bench/README.md).
        gc.freeze()
        try:
            yield
        finally:
            stop.set()  # the worker finishes the job in hand, the usage is written once more
            for task in (usage, pool_gauges, worker):
                if task is not None:
                    await task
            await asyncio.to_thread(app.state.chains.close)
            await app.state.readiness.close()
            await database.dispose()

    app = FastAPI(
        title="Tessera Wallet API",
        version=API_VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # tessera.web.docs serves it, with Swagger UI from the package, not a CDN
        redoc_url=None,
        telemetry={
            "tracing": settings.opentelemetry,
            "metrics": settings.opentelemetry,
            "logs": settings.opentelemetry,
        },
    )
    box = SecretBox(settings.key_ring)
    app.state.settings = settings
    app.state.box = box
    app.state.signers = Signers(box)
    app.state.wallets = Wallets.load(settings)
    app.state.authenticator = Authenticator(settings, box)
    app.state.chains = Chains(settings)
    app.state.job_handlers = job_handlers()
    app.state.rate_limiter = RateLimiter(
        read=settings.rate_limit_read, write=settings.rate_limit_write
    )
    app.state.claim_limiter = ClaimLimiter(
        per_address=settings.claim_rate_per_address, per_link=settings.claim_rate_per_link
    )
    app.state.console_limiter = SignInLimiter()

    install_error_handlers(app)
    console.install(app)
    app.add_middleware(ConstantAnswers)  # inside the request context
    app.add_middleware(
        RequestContextMiddleware,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
        access_log=settings.access_log,
    )
    app.include_router(index_router)
    app.include_router(version_router)
    app.include_router(health_router)
    app.include_router(metrics_router)
    app.include_router(auth_router)
    include_v1(app)
    app.include_router(claims_router)
    app.include_router(claim_pages.router)
    app.include_router(ticket_pages.router)
    app.include_router(pass_pages.router)
    app.include_router(passkit_router)
    app.include_router(scanner_router)
    app.include_router(console_router)
    for pages in (
        console_events,
        console_door,
        console_seats,
        console_products,
        console_waiting,
        console_reconciliation,
        console_users,
        console_jobs,
        console_webhooks,
        console_mail,
    ):
        app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=PACKAGE / "static"), name="static")
    app.include_router(docs_router)
    app.mount(ASSETS, StaticFiles(packages=[SWAGGER_UI]), name="docs_assets")
    document_deliveries(app)
    document(
        app,
        rate_limits=app.state.rate_limiter.on,
        webhook_url=url_pattern(allow_private=settings.webhooks_allow_private),
    )
    routing.index(app.router)
    return app
