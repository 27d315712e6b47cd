"""Wallets against a stand-in CA (``ca``): ``wallet_app`` is the app with Apple Wallet and
Google Wallet configured, its files made in this run; ``client`` talks to it, ``plain`` to
the app as the other tests run it, with no wallet."""

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tessera.config import Settings
from tessera.db import Database
from tessera.main import create_app
from tests.passes.ca import StandInCa


@pytest.fixture(scope="session")
def stand_in_ca(tmp_path_factory: pytest.TempPathFactory) -> StandInCa:
    return StandInCa.make(tmp_path_factory.mktemp("wallet-ca"))


@pytest.fixture(scope="session")
def wallet_settings(settings: Settings, stand_in_ca: StandInCa) -> Settings:
    return Settings(**(settings.model_dump() | stand_in_ca.settings()))


@pytest.fixture(scope="session")
async def wallet_app(wallet_settings: Settings, database: Database) -> AsyncIterator[FastAPI]:
    # `database` first: the schema is migrated, and every test gets the clean slate.
    application = create_app(wallet_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(wallet_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=wallet_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


@pytest.fixture
async def plain(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app as the tests run it elsewhere: no wallet configured."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http
