"""Test fixtures: real databases, the real app over ASGI, real keys.

``TESSERA_TEST_BACKEND`` picks the database: ``sqlite`` (default) or ``postgresql`` (then
``TESSERA_TEST_DATABASE_URL`` is required and must be reachable: no skipping). Each xdist worker
gets its own database, migrated once with Alembic; every test starts from empty tables.
"""

import asyncio
import base64
import json
import os
import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from jwt.algorithms import RSAAlgorithm
from sqlalchemy import delete
from sqlalchemy.engine import make_url

from tessera import migrations
from tessera.config import Settings
from tessera.db import Database, database_of
from tessera.main import create_app
from tessera.models import Base, SigningKey
from tests import orm
from tests.factories import Tenant, make_tenant
from tests.serving import recreate_postgres_database

ROOT = Path(__file__).resolve().parents[1]
BACKEND = os.environ.get("TESSERA_TEST_BACKEND", "sqlite")
OIDC_ISSUER = "https://accounts.test.invalid"
OIDC_AUDIENCE = "tessera-tests"
# The suite through PgBouncer (make test-pgbouncer): a Database a test opens itself says so too.
TRANSACTION_POOLER = Settings().db_transaction_pooler


def database_at(url: str, **sizes: int) -> Database:
    """A Database of a test's own on ``url`` (another process's, as it were), reaching it as the
    suite does (``TRANSACTION_POOLER``)."""
    return Database(url, transaction_pooler=TRANSACTION_POOLER, **sizes)


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _migrate(url: str) -> None:
    migrations.upgrade(url)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    if BACKEND == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.getbasetemp() / f'tessera-{_worker()}.db'}"
    elif BACKEND == "postgresql":
        base = os.environ.get("TESSERA_TEST_DATABASE_URL")
        if not base:
            pytest.fail("TESSERA_TEST_BACKEND=postgresql needs TESSERA_TEST_DATABASE_URL")
        name = f"{make_url(base).database or 'tessera'}_test_{_worker()}"
        url = make_url(base).set(database=name).render_as_string(hide_password=False)
        with ThreadPoolExecutor(1) as pool:  # outside the test event loop
            pool.submit(asyncio.run, recreate_postgres_database(base, name)).result()
    else:
        pytest.fail(f"unknown TESSERA_TEST_BACKEND {BACKEND!r}")
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_migrate, url).result()
    return url


class _JwksServer:
    """An OIDC provider's JWKS endpoint on 127.0.0.1, with a key the tests sign with."""

    def __init__(self) -> None:
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        jwk = json.loads(RSAAlgorithm.to_jwk(self.private_key.public_key()))
        self.body = json.dumps({"keys": [jwk | {"kid": self.kid, "alg": "RS256", "use": "sig"}]})
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                payload = server.body.encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="session")
def jwks_server() -> Iterator[_JwksServer]:
    server = _JwksServer()
    yield server
    server.httpd.shutdown()


def _random_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


@pytest.fixture(scope="session")
def settings(database_url: str, jwks_server: _JwksServer) -> Settings:
    return Settings(
        env="test",
        database_url=database_url,
        secret_keys=f"k1:{_random_key()}",
        hash_key=secrets.token_hex(32),
        oidc_issuer=OIDC_ISSUER,
        oidc_audience=OIDC_AUDIENCE,
        oidc_jwks_url=jwks_server.url,
        max_body_bytes=1024 * 1024,  # a plan of 50,001 plain seats gets through to be refused
        # Configured but unreachable: the real runtime is in the `chain` tests (tests/chain/).
        chain_westendassethub_rpc_url="ws://127.0.0.1:9",
        chain_timeout_seconds=2,
        worker_in_process=False,
        # A batch of jobs is claimed as soon as it is due (the tests that gather set it), and
        # extrinsics are followed closely.
        job_batch_gather_seconds=0,
        job_batch_max_wait_seconds=0,
        chain_poll_seconds=0.05,
    )


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session")
def database(app: FastAPI) -> Database:
    return database_of(app)


@pytest.fixture(autouse=True)
async def clean_slate(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    if "app" not in request.fixturenames:
        yield
        return
    database: Database = request.getfixturevalue("database")
    yield
    async with orm.session(database) as session:
        for table in reversed(Base.metadata.sorted_tables):
            # Signing keys are the issuer's process-wide state, not project data.
            if table.name != SigningKey.__tablename__:
                await session.execute(delete(table))
        await session.commit()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
async def tenant(app: FastAPI) -> Tenant:
    return await make_tenant(app)


@pytest.fixture
async def other(app: FastAPI) -> Tenant:
    """A second project: its ids must be invisible to ``tenant``."""
    return await make_tenant(app, name="Other")
