"""Ticket email and phone wallets: on a server configured for them, each ticket in a ticket email
links to its Apple Wallet pass (``{page}/pass.pkpass``) and its Google Wallet link
(``{page}/google-wallet``), in the text and the HTML, and both answer; without them the email
links to neither."""

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tessera.config import Settings
from tessera.db import Database
from tessera.main import create_app
from tests.factories import Tenant, create_product, create_user, issue_items, make_tenant
from tests.mail.conftest import TICKET_LINK, emails_on, send_until
from tests.passes.ca import StandInCa

APPLE_LINK = re.compile(r"http://tessera\.test/tickets/[A-Za-z0-9_-]{43}/pass\.pkpass")
GOOGLE_LINK = re.compile(r"http://tessera\.test/tickets/[A-Za-z0-9_-]{43}/google-wallet")


@pytest.fixture(scope="module")
def stand_in_ca(tmp_path_factory: pytest.TempPathFactory) -> StandInCa:
    return StandInCa.make(tmp_path_factory.mktemp("mail-wallet-ca"))


@pytest.fixture(scope="module")
async def wallet_mail_app(
    mail_settings: Settings, stand_in_ca: StandInCa, database: Database
) -> AsyncIterator[FastAPI]:
    # `database` first: the schema is migrated, and every test gets the clean slate.
    settings = Settings(**(mail_settings.model_dump() | stand_in_ca.settings()))
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def wallet_client(wallet_mail_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=wallet_mail_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tessera.test") as http:
        yield http


async def a_ticket_mailed(client, app: FastAPI, tenant: Tenant, smtp, postman) -> None:
    await emails_on(app, tenant)
    product = await create_product(client, tenant, name="Gala")
    ada = await create_user(client, tenant, firstName="Ada")
    await issue_items(client, tenant, product["id"], ada["id"], ada["id"])
    await send_until(postman, lambda: len(smtp.received) >= 1)
    assert len(smtp.received) == 1


class TestWalletLinks:
    async def test_both_wallets_linked_and_answering(
        self, wallet_client, wallet_mail_app, smtp, postman
    ):
        tenant = await make_tenant(wallet_mail_app)
        await a_ticket_mailed(wallet_client, wallet_mail_app, tenant, smtp, postman)
        [received] = smtp.received
        pages = received.links(TICKET_LINK)
        assert len(pages) == 2
        assert received.links(APPLE_LINK) == [f"{page}/pass.pkpass" for page in pages]
        assert received.links(GOOGLE_LINK) == [f"{page}/google-wallet" for page in pages]
        assert "Add to Apple Wallet" in received.text and "Add to Apple Wallet" in received.html
        assert "Add to Google Wallet" in received.text and "Add to Google Wallet" in received.html
        for page in pages:
            path = httpx.URL(page).path
            apple = await wallet_client.get(f"{path}/pass.pkpass")
            assert apple.status_code == 200
            assert apple.headers["content-type"] == "application/vnd.apple.pkpass"
            google = await wallet_client.get(f"{path}/google-wallet")
            assert google.status_code == 303
            assert google.headers["location"].startswith("https://pay.google.com/gp/v/save/")

    async def test_no_wallet_no_link(self, client, mail_app, smtp, postman):
        tenant = await make_tenant(mail_app)
        await a_ticket_mailed(client, mail_app, tenant, smtp, postman)
        [received] = smtp.received
        assert len(received.links(TICKET_LINK)) == 2
        assert received.links(APPLE_LINK) == [] and received.links(GOOGLE_LINK) == []
        assert "Wallet" not in received.text and "Wallet" not in received.html
