"""The real Asset Hub runtime (Chopsticks on loopback), one per xdist worker.

Without Node.js or the installed Chopsticks these tests skip with the reason; with
TESSERA_REQUIRE_CHAIN=1 (CI) they fail instead.
"""

import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx
import pytest
import sr25519
from fastapi import FastAPI

from tessera.chain import devchain as dc
from tessera.jobs.worker import JobContext, Worker
from tessera.main import create_app, make_worker

DOT = 10**10  # the Polkadot Asset Hub runtime Tessera carries counts in DOT, 10 decimals


def require_chopsticks(settings) -> None:
    """Skip the test without Node.js or the installed Chopsticks (fail, with
    TESSERA_REQUIRE_CHAIN=1)."""
    reason = None
    cache = dc.cache_path(settings)
    if not dc.node_available():
        reason = "Node.js is not installed: chain tests need Chopsticks"
    elif not dc.installed(cache):
        reason = f"Chopsticks is not installed in {cache}: run `make chopsticks` once"
    if reason:
        if os.environ.get("TESSERA_REQUIRE_CHAIN") == "1":
            pytest.fail(f"TESSERA_REQUIRE_CHAIN=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def devchain(tmp_path_factory: pytest.TempPathFactory, settings) -> Iterator[dc.Devchain]:
    require_chopsticks(settings)
    cache = dc.cache_path(settings)
    chain = dc.Devchain(
        dc.spec_path(settings), cache, log=tmp_path_factory.mktemp("chain") / "chopsticks.log"
    )
    chain.start()
    yield chain
    chain.stop()


@pytest.fixture(scope="session")
async def chain_app(settings, devchain, database) -> AsyncIterator[FastAPI]:
    chain_settings = settings.model_copy(
        update={
            "chain_assethub_rpc_url": devchain.url,
            "chain_timeout_seconds": 30.0,
            # Chopsticks builds a block as soon as an extrinsic arrives: one not seen in a block
            # after 2 s is lost, and is submitted again.
            "chain_resubmit_seconds": 2.0,
        }
    )
    application = create_app(chain_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def chain_client(chain_app) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=chain_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
def worker(chain_app) -> Worker:
    state = chain_app.state
    return make_worker(JobContext(state.database, state.box, state.chains), state.settings)


def land(gateway, seed: bytes, parts: list, within: float = 30.0) -> None:
    """Sign ``parts`` with a custodial ``seed`` at its account's next nonce, submit them, and
    wait until they landed (Chopsticks builds a block as the extrinsic arrives): a change made
    on chain outside Tessera's worker."""
    signer = bytes(sr25519.pair_from_seed(seed)[0])
    nonce = gateway.account(signer).nonce
    gateway.submit(gateway.sign(seed, parts, nonce=nonce, era_blocks=64).extrinsic)
    deadline = time.monotonic() + within
    while gateway.account(signer).nonce == nonce:
        assert time.monotonic() < deadline, "the extrinsic did not land"
        time.sleep(0.05)


@contextmanager
def blocks_on_demand(devchain: dc.Devchain) -> Iterator[int]:
    """Within the block, Chopsticks builds a block only when asked (``dev_newBlock``): what is
    submitted waits in its pool. The best block's number as the block began. On leaving,
    Chopsticks builds one as each extrinsic arrives again, and puts what its pool still holds in
    a block (throwing away what can no longer land), so that the next test finds it as usual."""
    _build_mode(devchain, "Manual")
    try:
        yield devchain.head()
    finally:
        _build_mode(devchain, "Instant")
        if devchain.rpc("author_pendingExtrinsics", []):
            devchain.rpc("dev_newBlock", [])


def _build_mode(devchain: dc.Devchain, mode: str) -> None:
    """``dev_setBlockBuildMode``, whose answer has no ``result`` (``Devchain.rpc`` wants one)."""
    body = {"id": 1, "jsonrpc": "2.0", "method": "dev_setBlockBuildMode", "params": [mode]}
    answer = httpx.post(f"http://127.0.0.1:{devchain.port}", json=body, timeout=30).json()
    assert "error" not in answer, answer


@pytest.fixture
def gateway(chain_app):
    """The real gateway (for assertions about chain state)."""
    return chain_app.state.chains.gateway("AssetHub")
