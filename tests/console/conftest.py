"""The console through real HTTP into the app: an operator signed in with a session cookie,
and the CSRF token every form carries (``Console.post`` adds it); WestendAssetHub (configured
in the tests' settings) as an in-memory chain, and a job worker on it."""

import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from tessera.chain.registry import Chains
from tessera.console.service import create_operator
from tessera.db import database_of
from tessera.jobs.worker import JobContext, Worker
from tessera.main import make_worker
from tests.factories import Tenant
from tests.jobs.memory_chain import MemoryChain

OPERATOR_EMAIL = "ops@example.com"
OPERATOR_PASSWORD = "correct horse battery staple"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Console:
    """A browser's session: ``get`` and ``post`` (which adds the CSRF token of the session)."""

    http: httpx.AsyncClient
    csrf: str = ""

    async def get(self, path: str) -> httpx.Response:
        response = await self.http.get(path)
        if found := CSRF.search(response.text):
            self.csrf = found.group(1)
        return response

    async def post(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        if not self.csrf:
            await self.get("/console")
        return await self.http.post(path, data={"csrf": self.csrf, **(data or {})})


async def sign_in(app: FastAPI, email: str, password: str) -> Console:
    transport = httpx.ASGITransport(app=app)
    # On loopback the session cookie is not Secure, so that plain http keeps it.
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    response = await http.post(
        "/console/login", data={"email": email, "password": password, "next": "/console"}
    )
    assert response.status_code == 303, response.text
    console = Console(http)
    await console.get("/console")
    return console


@pytest.fixture
async def operator(app: FastAPI) -> AsyncIterator[Console]:
    """An operator, signed in (sees every project)."""
    await create_operator(database_of(app), email=OPERATOR_EMAIL, password=OPERATOR_PASSWORD)
    console = await sign_in(app, OPERATOR_EMAIL, OPERATOR_PASSWORD)
    yield console
    await console.http.aclose()


async def owner_console(app: FastAPI, tenant: Tenant) -> Console:
    """The owner of ``tenant``'s project, signed in with its write key (sees that one only);
    the caller closes its ``http``."""
    transport = httpx.ASGITransport(app=app)
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    response = await http.post(
        "/console/login/key", data={"api_key": tenant.w["x-api-key"], "next": "/console"}
    )
    assert response.status_code == 303, response.text
    console = Console(http)
    await console.get(f"/console/projects/{tenant.project_id}")
    return console


@pytest.fixture
async def owner(app: FastAPI, tenant) -> AsyncIterator[Console]:
    """The owner of ``tenant``'s project, signed in with its write key (sees that one only)."""
    console = await owner_console(app, tenant)
    yield console
    await console.http.aclose()


@pytest.fixture
def chain(app: FastAPI) -> Iterator[MemoryChain]:
    """WestendAssetHub (configured in the tests' settings) as an in-memory chain."""
    memory = MemoryChain()
    configured = app.state.chains
    app.state.chains = Chains(app.state.settings, connect=lambda url, timeout: memory)
    yield memory
    app.state.chains = configured


@pytest.fixture
def worker(app: FastAPI, chain: MemoryChain) -> Worker:
    """The job worker on the in-memory chain (the app runs none of its own in the tests)."""
    state = app.state
    return make_worker(JobContext(state.database, state.box, state.chains), state.settings)
