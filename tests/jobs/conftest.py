"""The worker and the NFT job handlers against ``MemoryChain``: no Node.js, no runtime.

``jobs_app`` is the app with Asset Hub configured at an RPC URL that is never dialled: each test
gets a fresh ``MemoryChain`` behind the app's ``Chains`` (``chain``), and a client and a worker on
that app.
"""

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tessera.chain.registry import Chains
from tessera.config import Settings
from tessera.db import Database
from tessera.jobs.worker import JobContext, Worker
from tessera.main import create_app, make_worker
from tests.jobs.memory_chain import MemoryChain


@pytest.fixture(scope="session")
async def jobs_app(settings: Settings, database: Database) -> AsyncIterator[FastAPI]:
    # `database` first: the schema is migrated, and every test gets the clean slate.
    jobs_settings = settings.model_copy(
        update={
            "chain_assethub_rpc_url": "ws://127.0.0.1:9",
            "job_max_attempts": 3,
            # Batches are claimed as soon as they are due; extrinsics are looked at closely, and
            # one that goes unseen in a block is submitted again soon.
            "job_batch_gather_seconds": 0,
            "job_batch_max_wait_seconds": 0,
            "chain_poll_seconds": 0.01,
            "chain_resubmit_seconds": 0.05,
        }
    )
    application = create_app(jobs_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
def chain(jobs_app: FastAPI) -> MemoryChain:
    memory = MemoryChain()
    jobs_app.state.chains = Chains(jobs_app.state.settings, connect=lambda url, timeout: memory)
    return memory


@pytest.fixture
async def client(jobs_app: FastAPI, chain: MemoryChain) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=jobs_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
def worker(jobs_app: FastAPI, chain: MemoryChain) -> Worker:
    state = jobs_app.state
    return make_worker(JobContext(state.database, state.box, state.chains), state.settings)


@pytest.fixture
def impatient(jobs_app: FastAPI, worker: Worker) -> Worker:
    """A worker that gives up after one attempt."""
    settings = jobs_app.state.settings.model_copy(update={"job_max_attempts": 1})
    return make_worker(worker.context, settings)
